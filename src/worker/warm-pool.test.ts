/**
 * The pool's bookkeeping with a manual clock and stand-in sandboxes (the real-engine
 * behaviour is in test/warm-pool.docker.test.ts): only waiting runners are handed out,
 * each once; the target follows demand; dead and hung sandboxes are replaced.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { testLifecycle } from '../../test/helpers/lifecycle.js';
import type { SandboxLifecycle } from '../core/index.js';
import type { LaunchedSandbox, SandboxProfile } from './sandbox-launch.js';
import { WarmPool } from './warm-pool.js';

const PROFILE: SandboxProfile = {
  image: 'img',
  memoryMb: 512,
  cpus: 1,
  pidsLimit: 256,
  workspaceMb: 1024,
  isolation: 'runc',
  mounts: [],
};
const OTHER: SandboxProfile = { ...PROFILE, memoryMb: 300 };

function harness(sizes = { min: 1, max: 3 }) {
  let now = 1_000_000;
  let seq = 0;
  const lifecycles = new Map<string, SandboxLifecycle>();
  const disposed: string[] = [];
  const launched: string[] = [];
  const images = new Map<string, string>();
  const readyCallbacks = new Map<string, () => void>();
  const pool = new WarmPool(
    {
      clock: { now: () => now },
      log: pino({ level: 'silent' }),
      newLifecycle: () => testLifecycle(`p${++seq}`, undefined, true),
      launch: async (lifecycle, _key, profile, onReady) => {
        const { name } = lifecycle;
        launched.push(name);
        images.set(name, profile.image);
        readyCallbacks.set(name, onReady);
        lifecycles.set(name, lifecycle);
        return { name, handle: { id: name, name, labels: {} }, lifecycle } as unknown as LaunchedSandbox;
      },
      dispose: async (s) => void disposed.push(s.name),
    },
    sizes,
    PROFILE,
  );
  const boot = (name: string) => {
    lifecycles.get(name)?.runnerWaitsForBind(true);
    readyCallbacks.get(name)?.();
  };
  const settle = async () => {
    for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  };
  return {
    pool,
    disposed,
    launched,
    images,
    boot,
    settle,
    advance: (ms: number) => {
      now += ms;
    },
    /** The loop re-checks every 15 s of real time on its own; the test wakes it instead. */
    recheck: () => (pool as unknown as { wake: { notify(): void } }).wake.notify(),
  };
}

test('warm pool: hands out only sandboxes whose runner waits, each once, and refills', async (t) => {
  const h = harness();
  h.pool.start();
  t.after(() => h.pool.stop());
  await h.settle();
  assert.deepEqual(h.launched, ['p1'], 'the default profile is kept at min (1) from the start');
  assert.equal(h.pool.take(PROFILE), null, 'not booted yet: a cold start');
  h.boot('p1');
  const taken = h.pool.take(PROFILE);
  assert.equal(taken?.name, 'p1');
  assert.equal(h.pool.take(PROFILE), null, 'never handed out twice');
  await h.settle();
  // Three takes in the last minute (two of them misses, which are demand too): the target is 3.
  assert.deepEqual(h.launched, ['p1', 'p2', 'p3', 'p4']);
  assert.deepEqual(h.pool.names().sort(), ['p2', 'p3', 'p4']);
  assert.equal(h.pool.stats().starting, 3);
  assert.deepEqual({ hits: h.pool.stats().hits, misses: h.pool.stats().misses }, { hits: 1, misses: 2 });
});

test('warm pool: a dead or hung sandbox is replaced; a profile nobody uses drains', async (t) => {
  const h = harness({ min: 1, max: 2 });
  h.pool.start();
  t.after(() => h.pool.stop());
  await h.settle();
  h.boot('p1');
  assert.equal(h.pool.onSandboxExit('p1'), true);
  assert.equal(h.pool.onSandboxExit('not-mine'), false);
  await h.settle();
  assert.deepEqual(h.disposed, ['p1']);
  assert.deepEqual(h.pool.names(), ['p2']);

  // p2 never asks for a binding: after the boot timeout it is replaced.
  h.advance(61_000);
  h.recheck();
  await h.settle();
  assert.ok(h.disposed.includes('p2'), 'a hung runner is disposed of');
  assert.deepEqual(h.pool.names(), ['p3']);

  // Another profile: a miss creates demand, so it is warmed; ten quiet minutes later it drains.
  assert.equal(h.pool.take(OTHER), null);
  await h.settle();
  assert.deepEqual(h.pool.names().sort(), ['p3', 'p4']);
  h.boot('p3');
  h.boot('p4');
  h.advance(11 * 60_000);
  h.recheck();
  await h.settle();
  assert.ok(h.disposed.includes('p4'), 'the unused profile drained');
  assert.deepEqual(h.pool.names(), ['p3'], 'the default profile keeps its minimum');
});

test('warm pool: one pool per image; an agent image never gets a sandbox of another image', async (t) => {
  const h = harness({ min: 1, max: 2 });
  h.pool.start();
  t.after(() => h.pool.stop());
  const AGENT_IMAGE: SandboxProfile = { ...PROFILE, image: 'berth-agent:abc' };
  assert.notEqual(WarmPool.keyOf(AGENT_IMAGE), WarmPool.keyOf(PROFILE), 'the image is part of the key');
  await h.settle();
  h.boot('p1');
  assert.equal(h.pool.take(AGENT_IMAGE), null, "the base image's ready sandbox is not handed out");
  await h.settle();
  assert.deepEqual(h.pool.names().sort(), ['p1', 'p2']);
  assert.equal(h.images.get('p2'), 'berth-agent:abc', 'the miss warmed a sandbox of the agent image');
  h.boot('p2');
  assert.equal(h.pool.take(AGENT_IMAGE)?.name, 'p2');
  assert.equal(h.pool.take(PROFILE)?.name, 'p1');
});
