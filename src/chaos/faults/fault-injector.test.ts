/**
 * Where the injector aims a worker kill and a partition: only at workers that run a turn
 * (the busiest first), and nowhere when none does within the wait, so a fault recorded is
 * a fault that could hit; and which sandboxes the sandbox kills spare. The faked boundaries
 * are the workers and the Engine API.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type Dockerode from 'dockerode';
import type { KillableWorker, PartitionableWorker } from '../fault-records.js';
import { FaultInjector, type FaultInjectorOptions } from './fault-injector.js';

const NEVER = { min: 3_600_000, max: 3_600_000 };
const noEngine = {} as Dockerode;

/** Workers that record what was done to them. */
function workers(names: string[], done: string[]): (KillableWorker & PartitionableWorker)[] {
  return names.map((name, i) => ({
    name,
    pid: 100 + i,
    workerId: () => `wrk-${name}`,
    sigkill: async () => {
      done.push(`kill ${name}`);
    },
    restart: async () => {
      done.push(`restart ${name}`);
    },
    cut: async () => {
      done.push(`cut ${name}`);
    },
    heal: async () => {
      done.push(`heal ${name}`);
    },
  }));
}

/** Runs an injector with these faults over workers named `names` until one settled, then stops it. */
async function inject(
  names: string[],
  faults: (
    w: (KillableWorker & PartitionableWorker)[],
  ) => Pick<FaultInjectorOptions, 'workerKill' | 'partition'>,
) {
  const done: string[] = [];
  const warnings: string[] = [];
  const injector = new FaultInjector({
    engines: () => [{ docker: noEngine, installId: 'x' }],
    killEveryMs: NEVER,
    maxDurationMs: 60_000,
    ...faults(workers(names, done)),
    onWarning: (m) => warnings.push(m),
  });
  injector.start();
  const deadline = Date.now() + 10_000;
  while (done.length === 0 && warnings.length === 0 && Date.now() < deadline)
    await new Promise((r) => setTimeout(r, 50));
  await injector.stop();
  return { done, warnings, faults: injector.faults };
}

/** Each worker's running turns: a count of turns just started, or `old:N`, N turns started a minute ago. */
const running = (byWorker: Record<string, number | `old:${number}`>) => async () =>
  new Map(
    Object.entries(byWorker).map(([name, n]) => {
      const old = typeof n === 'string';
      return [
        `wrk-${name}`,
        Array.from({ length: old ? Number(n.slice(4)) : n }, (_, i) => ({
          sessionId: `s-${name}-${i}`,
          sandbox: `sbx-${name}-${i}`,
          startedAt: Date.now() - (old ? 60_000 : 0),
          lastTry: false,
        })),
      ];
    }),
  );

test('a worker kill hits the workers that run turns, the busiest first; an idle worker never', async () => {
  const cases: {
    name: string;
    turns: Record<string, number | `old:${number}`>;
    count: number;
    killed: string[];
    warned: boolean;
  }[] = [
    { name: 'one busy worker', turns: { b: 1 }, count: 1, killed: ['b'], warned: false },
    // A turn found long running is likely done when the kill lands: a fresh one is aimed at first.
    {
      name: 'a fresh turn before more old ones',
      turns: { a: 'old:2', c: 1 },
      count: 1,
      killed: ['c'],
      warned: false,
    },
    {
      name: 'old turns only, after half the wait',
      turns: { a: 'old:1' },
      count: 1,
      killed: ['a'],
      warned: false,
    },
    { name: 'the busiest of two', turns: { a: 1, c: 2 }, count: 1, killed: ['c'], warned: false },
    { name: 'two of three, both busy', turns: { a: 2, c: 1 }, count: 2, killed: ['a', 'c'], warned: false },
    { name: 'two wanted, one busy', turns: { b: 1 }, count: 2, killed: ['b'], warned: true },
    { name: 'none busy', turns: {}, count: 1, killed: [], warned: true },
  ];
  for (const c of cases) {
    const { done, warnings, faults } = await inject(['a', 'b', 'c'], (w) => ({
      workerKill: {
        workers: w,
        count: c.count,
        due: () => true,
        runningTurns: running(c.turns),
        maxWaitForTurnsMs: 300,
        restartDelayMs: 0,
      },
    }));
    assert.deepEqual(
      done.filter((d) => d.startsWith('kill')).sort(),
      c.killed.map((n) => `kill ${n}`),
      c.name,
    );
    assert.deepEqual(
      faults.map((f) => (f.kind === 'worker-kill' ? f.child : f.kind)).sort(),
      c.killed,
      `${c.name}: only what was injected is recorded`,
    );
    assert.equal(
      warnings.some((m) => m.includes('not injected')),
      c.warned,
      c.name,
    );
  }
});

test('a partition cuts the busiest worker, and none when no worker runs a turn', async () => {
  const cases: { name: string; turns: Record<string, number>; cut: string[] }[] = [
    { name: 'busiest', turns: { a: 1, b: 3 }, cut: ['b'] },
    { name: 'none busy', turns: {}, cut: [] },
  ];
  for (const c of cases) {
    const { done, warnings, faults } = await inject(['a', 'b'], (w) => ({
      partition: {
        workers: w,
        due: () => true,
        runningTurns: running(c.turns),
        maxWaitForTurnsMs: 300,
        durationMs: 0,
        leaseMs: 0,
      },
    }));
    assert.deepEqual(
      done.filter((d) => d.startsWith('cut')),
      c.cut.map((n) => `cut ${n}`),
      c.name,
    );
    assert.equal(faults.length, c.cut.length, c.name);
    if (c.cut.length === 0)
      assert.ok(
        warnings.some((m) => m.startsWith('partition not injected')),
        c.name,
      );
  }
});

/** An engine whose running sandboxes are `names`, recording each one killed (they keep running). */
function engineOf(names: string[], killed: string[]): Dockerode {
  return {
    listContainers: async () => names.map((n) => ({ Id: n, Names: [`/${n}`], Labels: {} })),
    getContainer: (id: string) => ({
      kill: async () => {
        killed.push(id);
      },
    }),
  } as unknown as Dockerode;
}

test('sandbox kills never touch a turn on its last try, aimed or at random; with only such turns running, nothing is killed', async () => {
  const cases = [
    { name: 'a last try beside a first', sandboxes: ['sbx-last', 'sbx-first'], killable: ['sbx-first'] },
    { name: 'only a last try', sandboxes: ['sbx-last'], killable: [] },
  ];
  for (const c of cases) {
    const killed: string[] = [];
    const injector = new FaultInjector({
      engines: () => [{ docker: engineOf(c.sandboxes, killed), installId: 'x' }],
      killEveryMs: { min: 5, max: 10 },
      maxDurationMs: 60_000,
      runningTurns: async () =>
        new Map([
          [
            'wrk-a',
            c.sandboxes.map((sandbox) => ({
              sessionId: `s-${sandbox}`,
              sandbox,
              startedAt: Date.now(),
              lastTry: sandbox === 'sbx-last',
            })),
          ],
        ]),
    });
    injector.start();
    await new Promise((r) => setTimeout(r, 400));
    await injector.stop();
    assert.deepEqual([...new Set(killed)], c.killable, c.name);
    if (c.killable.length > 0)
      assert.ok(killed.length >= 4, `${c.name}: kills kept coming (${killed.length})`);
  }
});

test('a long turn named midway is killed at once, between the interval kills, and once only', async () => {
  for (const due of [['s-long'], []]) {
    const killed: string[] = [];
    const injector = new FaultInjector({
      engines: () => [{ docker: engineOf(['sbx-new', 'sbx-long'], killed), installId: 'x' }],
      // No interval kill comes within the test.
      killEveryMs: { min: 60_000, max: 60_000 },
      maxDurationMs: 60_000,
      runningTurns: async () =>
        new Map([
          [
            'wrk-a',
            [
              { sessionId: 's-new', sandbox: 'sbx-new', startedAt: Date.now(), lastTry: false },
              { sessionId: 's-long', sandbox: 'sbx-long', startedAt: Date.now(), lastTry: false },
            ],
          ],
        ]),
      longTurnsDue: () => due,
    });
    injector.start();
    await new Promise((r) => setTimeout(r, 400));
    await injector.stop();
    assert.deepEqual(killed, due.length > 0 ? ['sbx-long'] : [], `due: ${due.join(' ')}`);
  }
});
