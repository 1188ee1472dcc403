/**
 * A worker SIGKILLed at each step of a turn's commit and promotion (the failpoints of
 * src/core/failpoints.ts, armed in the doomed worker alone), on SQLite and on PostgreSQL:
 * the next owner takes the session over and promotes the committed layer exactly once, no
 * committed file is missing, nothing of an aborted turn is visible, and the message is
 * answered exactly once. Also: a layer owed by a dead worker is promoted by the worker
 * that claims its session, before that worker runs the next turn; and a worker whose row
 * was deleted while it was frozen (SIGSTOP past ten leases, as a paused VM) comes back
 * under its own id, having ended what it ran, and serves again.
 *
 * Messages go straight into the store (no API process): the workers are the only
 * processes on the data dir, so whoever promotes is a worker under test.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import {
  agentSpecSchema,
  COMMIT_FAILPOINTS,
  type CommitFailpointName,
  type ScriptPlan,
  type ScriptStep,
} from '../src/core/index.js';
import { connectDocker } from '../src/runtime/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { failpointEnv } from './helpers/failpoint-preload.js';
import { freshDatabase } from './helpers/postgres.js';
import { eventually, exited, spawnBerth } from './helpers/processes.js';

type StoreKind = 'sqlite' | 'postgres';

interface RunningWorker {
  name: string;
  child: ChildProcess;
  id: string;
}

/** One data dir and one store shared by the workers a test starts; `leaseMs` is their BERTH_LEASE. */
async function startInstall(t: TestContext, kind: StoreKind, leaseMs: number) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-failpoints-'));
  const storeUrl = kind === 'postgres' ? await freshDatabase() : '';
  const env = {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_LEASE: `${leaseMs}ms`,
    BERTH_STORE: storeUrl,
  };
  const store: Store = await openStore({
    store: storeUrl,
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs,
    retry: { retryBaseMs: 500, retryMaxMs: 5000, maxTries: 5 },
  });
  await store.createAgent(agentSpecSchema.parse({ name: 'scr', provider: 'script' }), store.clock.now());
  const children: ChildProcess[] = [];
  t.after(async () => {
    for (const c of children) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      c.kill('SIGCONT'); // a frozen one could not act on the SIGTERM
      c.kill('SIGTERM');
    }
    await Promise.all(children.map(exited));
    await store.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** `berth worker --slots <slots>`, once its row is in the store. */
  const startWorker = async (
    name: string,
    extraEnv: NodeJS.ProcessEnv = {},
    slots = 1,
  ): Promise<RunningWorker> => {
    const args = ['worker', '--slots', String(slots)];
    const child = spawnBerth(args, { ...env, ...extraEnv }, dataDir, `${name}.log`);
    children.push(child);
    const id = await eventually(
      `worker ${name} registered`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null)
          assert.fail(`worker ${name} exited: ${await readFile(join(dataDir, `${name}.log`), 'utf8')}`);
        return (await store.listWorkers()).find((w) => w.pid === child.pid)?.id;
      },
      60_000,
    );
    return { name, child, id };
  };

  const stopWorker = async (w: RunningWorker): Promise<void> => {
    w.child.kill('SIGTERM');
    await exited(w.child);
  };

  const send = (sessionId: string, plan: ScriptPlan) =>
    store.enqueueMessage({ sessionId, agent: 'scr', text: JSON.stringify(plan), now: store.clock.now() });

  /** The replies of the session, once it has `count` of them. */
  const replies = (sessionId: string, count: number, timeoutMs = 90_000) =>
    eventually(
      `${count} replies in ${sessionId}`,
      async () => {
        const out = (await store.listMessages(sessionId, 0, 100)).filter((m) => m.direction === 'out');
        return out.length >= count ? out : undefined;
      },
      timeoutMs,
    );

  /** Every 'Layer promoted' line the workers logged for this turn. */
  const promotionsOf = async (turnId: string) => {
    const lines: { worker: string; by: string; planApplied: boolean }[] = [];
    for (const file of (await readdir(dataDir)).filter((f) => f.endsWith('.log'))) {
      for (const line of (await readFile(join(dataDir, file), 'utf8')).split('\n')) {
        if (!line.includes('"Layer promoted"') || !line.includes(`"${turnId}"`)) continue;
        const entry = JSON.parse(line) as { by: string; planApplied: boolean };
        lines.push({ worker: file.replace(/\.log$/, ''), by: entry.by, planApplied: entry.planApplied });
      }
    }
    return lines;
  };

  const committedDir = (sessionId: string) => join(dataDir, 'workspaces', sessionId, 'committed');
  return { dataDir, store, startWorker, stopWorker, send, replies, promotionsOf, committedDir };
}

/** The first turn, by a healthy worker: what every later turn must still find. */
const FIRST: ScriptPlan = {
  steps: [
    { write: { path: 'keep.txt', content: 'kept\n' } },
    { append: { path: 'log.txt', content: 'one\n' } },
    { write: { path: 'gone.txt', content: 'deleted by the second turn\n' } },
  ],
  reply: 'first',
};

/**
 * The turn the failpoint cuts: a delete, an append and several new files, so that its
 * promotion has steps on both sides of its middle. Its try number names one file, so a
 * retry's files tell an aborted try's apart.
 */
const SECOND: ScriptPlan = {
  steps: [
    { run: 'rm gone.txt && mkdir -p dir && echo a > dir/a.txt && echo b > b.txt && echo c > c.txt' },
    { append: { path: 'log.txt', content: 'two\n' } },
    { run: 'echo "$BERTH_ATTEMPT" > "attempt-$BERTH_ATTEMPT.txt"' },
  ],
  reply: 'second',
};

/** What the committed workspace holds after the second turn committed from try `attempt`. */
function afterSecond(attempt: number): ScriptStep[] {
  return [
    { assertFile: { path: 'keep.txt', equals: 'kept\n' } },
    { assertFile: { path: 'log.txt', equals: 'one\ntwo\n' } },
    { assertFile: { path: 'gone.txt', equals: null } },
    { assertFile: { path: 'dir/a.txt', equals: 'a\n' } },
    { assertFile: { path: 'b.txt', equals: 'b\n' } },
    { assertFile: { path: 'c.txt', equals: 'c\n' } },
    { assertFile: { path: `attempt-${attempt}.txt`, equals: `${attempt}\n` } },
  ];
}

/** Whether the failpoint comes before the store commit: the cut turn is then aborted and tried again. */
const BEFORE_COMMIT: Record<CommitFailpointName, boolean> = {
  'after-seal': true,
  'after-upload': true,
  'before-promote': false,
  'mid-promotion': false,
  'before-mark-promoted': false,
};

for (const kind of ['sqlite', 'postgres'] as const)
  for (const point of COMMIT_FAILPOINTS)
    test(`${kind}: a worker SIGKILLed at ${point}: the next owner promotes once, no committed file is missing, nothing of the cut turn shows, one reply`, {
      timeout: 240_000,
    }, async (t) => {
      const install = await startInstall(t, kind, 2000);
      const { store, send, replies, promotionsOf } = install;
      const seed = await install.startWorker('seed');
      await send('s', FIRST);
      await replies('s', 1);
      await install.stopWorker(seed);

      const doomed = await install.startWorker('doomed', failpointEnv(point));
      await send('s', SECOND);
      await exited(doomed.child);
      assert.equal(doomed.child.signalCode, 'SIGKILL', `the worker died at ${point}`);
      const [cut] = (await store.listTurns('s')).slice(1);
      assert.ok(cut, 'the second turn started');
      const atCrash = (await store.getSessionView('s', store.clock.now()))!;
      if (BEFORE_COMMIT[point]) {
        assert.equal(cut.status, 'running', 'cut before its commit');
        assert.equal(atCrash.workspaceVersion, 1);
        assert.equal(atCrash.pendingLayer, null);
      } else {
        assert.equal(cut.status, 'committed', 'cut after its commit');
        assert.equal(atCrash.workspaceVersion, 2);
        assert.equal(atCrash.pendingLayer, cut.id, 'its promotion owed');
      }

      const next = await install.startWorker('next');
      const answered = await replies('s', 2);
      await eventually('the owed layer promoted', async () =>
        (await store.getSessionView('s', store.clock.now()))?.pendingLayer ? undefined : true,
      );
      const turns = await store.listTurns('s');
      const committed = turns.filter((x) => x.status === 'committed');
      assert.equal(committed.length, 2, 'the first turn and one of the second');
      const second = committed[1]!;
      if (BEFORE_COMMIT[point]) {
        assert.deepEqual(
          turns.map((x) => [x.status, x.errorCode]),
          [
            ['committed', null],
            ['aborted', 'LEASE_EXPIRED'],
            ['committed', null],
          ],
        );
        assert.equal(second.workerId, next.id);
        assert.deepEqual(await promotionsOf(cut.id), [], 'the cut try is never promoted');
      } else {
        assert.equal(second.id, cut.id, 'the cut turn stays committed, never run again');
      }
      const promoted = await promotionsOf(second.id);
      assert.equal(promoted.length, 1, `promoted once: ${JSON.stringify(promoted)}`);
      assert.equal(promoted[0]!.worker, 'next', 'by the next owner');
      assert.ok(promoted[0]!.planApplied, 'from the layer on this machine');
      assert.deepEqual(
        answered.map((m) => m.text),
        ['first', 'second'],
        'the second message answered once',
      );

      // The committed workspace on disk, and as the next turn's sandbox sees it.
      const attempt = second.attempt;
      assert.deepEqual(
        (await readdir(install.committedDir('s'))).sort(),
        [`attempt-${attempt}.txt`, 'b.txt', 'c.txt', 'dir', 'keep.txt', 'log.txt'],
        'every committed file, nothing of a cut try',
      );
      await send('s', { steps: afterSecond(attempt), reply: 'checked' });
      const all = await replies('s', 3);
      assert.equal(all[2]?.text, 'checked', JSON.stringify((await store.listTurns('s')).at(-1)));
      assert.equal(
        (await store.listTurns('s')).filter((x) => x.status === 'aborted').length,
        turns.length - 2,
      );
    });

for (const kind of ['sqlite', 'postgres'] as const)
  test(`${kind}: a layer owed by a dead worker is promoted by the worker that claims the session, before it runs the next turn`, {
    timeout: 240_000,
  }, async (t) => {
    const install = await startInstall(t, kind, 3000);
    const { store, send, replies, promotionsOf } = install;
    const doomed = await install.startWorker('doomed', failpointEnv('before-promote'));
    // Long enough for the claimer to start while the doomed worker holds the session: its
    // start-up clean-up then sees a live owner and leaves the layer alone.
    await send('s', {
      steps: [{ sleep: 15_000 }, { write: { path: 'owed.txt', content: 'owed\n' } }],
      reply: 'committed',
    });
    await eventually('the turn running', async () =>
      (await store.listTurns('s')).some((x) => x.status === 'running') ? true : undefined,
    );
    const claimer = await install.startWorker('claimer');
    assert.equal(
      (await store.listTurns('s'))[0]?.status,
      'running',
      'the claimer started before the turn ended (on a slower machine, lengthen its sleep)',
    );
    // The next message waits already: the session is claimed as soon as the dead worker's lease lapses.
    await send('s', {
      steps: [{ assertFile: { path: 'owed.txt', equals: 'owed\n' } }],
      reply: 'saw the owed layer',
    });
    await exited(doomed.child);
    assert.equal(doomed.child.signalCode, 'SIGKILL');
    const [committed] = await store.listTurns('s');
    assert.equal(committed?.status, 'committed');
    const owed = committed.id;
    const answered = await replies('s', 2);
    assert.deepEqual(
      answered.map((m) => m.text),
      ['committed', 'saw the owed layer'],
    );
    const [, next] = await store.listTurns('s');
    assert.equal(next?.workerId, claimer.id);
    assert.deepEqual(await promotionsOf(owed), [{ worker: 'claimer', by: 'claim', planApplied: true }]);
    // Owed now, if anything, is the last turn's own layer, never the one the claim promoted.
    assert.notEqual((await store.getSessionView('s', store.clock.now()))?.pendingLayer, owed);
  });

for (const kind of ['sqlite', 'postgres'] as const)
  test(`${kind}: a worker frozen past ten leases finds its row deleted: it ends what it ran, registers again under its id, and serves`, {
    timeout: 240_000,
  }, async (t) => {
    const leaseMs = 1000;
    const install = await startInstall(t, kind, leaseMs);
    const { store, send, replies } = install;
    const frozen = await install.startWorker('frozen');
    // The first try outlasts the freeze; a retry is quick.
    await send('s', { steps: [{ run: 'if [ "$BERTH_ATTEMPT" = 1 ]; then sleep 60; fi' }], reply: 'done' });
    const running = await eventually('the turn running', async () =>
      (await store.listTurns('s')).find((x) => x.status === 'running'),
    );
    assert.equal(running.workerId, frozen.id);
    // No slots: it sweeps, and leaves the retry to the frozen worker once it is back.
    await install.startWorker('sweeper', {}, 0);
    frozen.child.kill('SIGSTOP');
    // The sweeper reclaims the session (LEASE_EXPIRED) and, ten leases on, deletes the silent row.
    await eventually(
      'the frozen worker’s row deleted',
      async () => ((await store.listWorkers()).some((w) => w.id === frozen.id) ? undefined : true),
      60_000,
    );
    const reclaimed = (await store.listTurns('s'))[0]!;
    assert.equal(reclaimed.status, 'aborted');
    assert.equal(reclaimed.errorCode, 'LEASE_EXPIRED');
    frozen.child.kill('SIGCONT');

    await eventually('registered again under its id', async () =>
      (await store.listWorkers()).some((w) => w.id === frozen.id && w.pid === frozen.child.pid)
        ? true
        : undefined,
    );
    const log = await readFile(join(install.dataDir, 'frozen.log'), 'utf8');
    assert.match(log, /Worker row gone: ending own sessions and registering again/);
    const answered = await replies('s', 1, 120_000);
    assert.deepEqual(
      answered.map((m) => m.text),
      ['done'],
      'answered once',
    );
    const turns = await store.listTurns('s');
    const committed = turns.filter((x) => x.status === 'committed');
    assert.equal(committed.length, 1);
    assert.equal(committed[0]!.workerId, frozen.id, 'the rejoined worker served the retry');
    assert.ok(committed[0]!.attempt > 1);
    assert.equal(turns.find((x) => x.id === running.id)?.status, 'aborted', 'the frozen try never committed');
    // The frozen try's sandbox is gone: killed by its worker when it found its lease lost.
    const docker = connectDocker('/var/run/docker.sock');
    await eventually('the frozen try’s sandbox gone', async () => {
      const left = await docker.listContainers({
        filters: { name: [running.sandbox!], status: ['running'] },
      });
      return left.length === 0 ? true : undefined;
    });
  });
