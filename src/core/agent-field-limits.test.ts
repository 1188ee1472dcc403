import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentFieldLimits } from './agent-field-limits.js';

test('agentFieldLimits reads defaults and bounds from the schema (and the defaults applied where a field is read)', () => {
  assert.equal(agentFieldLimits('memoryMb'), 'default 512; 16-1048576');
  assert.equal(agentFieldLimits('cpus'), 'default 1; > 0, max 256');
  assert.equal(agentFieldLimits('isolation'), 'default runc');
  assert.equal(agentFieldLimits('mounts'), 'default []; max 16 entries');
  assert.equal(agentFieldLimits('recycle.maxAgeMs'), 'min 1000');
  assert.equal(agentFieldLimits('harnessTimeoutMs'), 'default 600000; 1000-86400000');
  assert.equal(agentFieldLimits('maxSchedules'), 'default 5; 0-1000');
  assert.equal(agentFieldLimits('model'), 'max 200 chars');
  assert.equal(agentFieldLimits('packages.npm'), 'max 64 entries');
  assert.equal(agentFieldLimits('secret'), '');
  assert.throws(() => agentFieldLimits('recycle.maxAge'), /not in the agent schema/);
});
