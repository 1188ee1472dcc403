import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parse } from 'yaml';
import { agentSpecSchema } from '../core/index.js';
import { agentFileIssues, changeLines, formatAgentSpec } from './agent-file.js';

test('show output parses back to the same spec, in YAML and JSON, strings that look like other YAML included', () => {
  const spec = agentSpecSchema.parse({
    name: 'y',
    provider: 'anthropic',
    model: '1e3',
    instructions: 'yes\nno: maybe\n- not a list\n',
    secret: 'true',
    image: 'null',
    egress: [{ target: 'api.example.com:443', headers: { Authorization: 'Bearer {{secret:true}}' } }],
    budget: { tokensPerHour: 1000 },
  });
  for (const format of ['yaml', 'json'] as const) {
    const back = parse(formatAgentSpec(spec, format));
    assert.deepEqual(back, spec, format);
    assert.deepEqual(agentFileIssues(back), [], format);
  }
});

test('changeLines: one line per change, unset shown as such', () => {
  assert.deepEqual(
    changeLines([
      { path: 'memoryMb', from: 512, to: 1024 },
      { path: 'model', from: 'm' },
      { path: 'recycle.maxAgeMs', to: 60000 },
    ]),
    ['  memoryMb: 512 -> 1024', '  model: "m" -> (unset)', '  recycle.maxAgeMs: (unset) -> 60000'],
  );
});
