import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentSpecSchema } from './agent.js';
import { diffAgentSpecs } from './agent-diff.js';

const spec = (fields: Record<string, unknown>) =>
  agentSpecSchema.parse({ name: 'a', provider: 'command', ...fields });

test('diffAgentSpecs: nothing for the same agent written with or without its defaults', () => {
  assert.deepEqual(diffAgentSpecs(spec({}), spec({ memoryMb: 512, isolation: 'runc', egress: [] })), []);
});

test('diffAgentSpecs: field by field, nested objects by their own fields, lists whole, unset both ways', () => {
  const before = spec({ mode: 'resident', recycle: { maxAgeMs: 60_000 }, egress: ['a.b:1'], model: 'm' });
  const after = spec({
    mode: 'resident',
    recycle: { maxAgeMs: 120_000, maxRssMb: 100 },
    egress: ['a.b:1', 'c.d:2'],
    memoryMb: 1024,
  });
  assert.deepEqual(diffAgentSpecs(before, after), [
    { path: 'memoryMb', from: 512, to: 1024 },
    { path: 'egress', from: ['a.b:1'], to: ['a.b:1', 'c.d:2'] },
    { path: 'recycle.maxAgeMs', from: 60_000, to: 120_000 },
    { path: 'recycle.maxRssMb', to: 100 },
    { path: 'model', from: 'm' },
  ]);
});
