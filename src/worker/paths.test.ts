import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSandboxName, sandboxName } from './paths.js';

test('sandbox names round-trip to their binding, and other installs parse to null', () => {
  for (const [session, generation] of [
    ['s1', 1],
    ['a.b-g2', 17],
    ['x-g', 3],
  ] as const) {
    assert.deepEqual(parseSandboxName('abc', sandboxName('abc', session, generation)), {
      sessionId: session,
      generation,
    });
  }
  assert.equal(parseSandboxName('abc', sandboxName('other', 's1', 1)), null);
  assert.equal(parseSandboxName('abc', 'berth-abc-nogeneration'), null);
});
