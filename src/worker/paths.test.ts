import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePoolSandboxName, parseSandboxName, poolSandboxName, sandboxName } from './paths.js';

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

test('warm sandbox names name their worker and never parse as a session binding', () => {
  const name = poolSandboxName('abc', 'wrk_mf3k2a9c0ffee', 7);
  assert.deepEqual(parsePoolSandboxName('abc', name), { workerId: 'wrk_mf3k2a9c0ffee' });
  assert.equal(parseSandboxName('abc', name), null);
  assert.equal(parsePoolSandboxName('other', name), null);
  // A session whose id looks like a pool name is still a session.
  const session = sandboxName('abc', 'pool-wrk_x-1', 2);
  assert.equal(parsePoolSandboxName('abc', session), null);
  assert.deepEqual(parseSandboxName('abc', session), { sessionId: 'pool-wrk_x-1', generation: 2 });
});
