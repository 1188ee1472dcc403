/**
 * TurnCheckpoints against a real overlay, a real file blob store and a real SQLite store
 * (the one boundary faked: a blob store whose next checkpoint upload fails). A checkpoint
 * whose upload fails is answered CHECKPOINT_FAILED and never used: the next one is a delta
 * over the last one recorded, and a retry restores that chain (its files and deletions)
 * into a fresh attempt, with the count and label of the newest. A chain at its bound
 * restarts with a full checkpoint. At a model call, a turn that changed nothing records
 * nothing. The sandbox is frozen around the scan and pack only, and thawed when they fail.
 * Needs root (overlay mounts).
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { pino } from 'pino';
import { type BlobStore, FileBlobStore } from '../src/blobs/index.js';
import { BerthError, isBerthError, systemClock, type Turn } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import type { SandboxDeps } from '../src/worker/deps.js';
import { MODEL_CALL_LABEL, TurnCheckpoints } from '../src/worker/turn-checkpoints.js';
import { Workspaces } from '../src/workspace/index.js';
import { BASE, claimAndStartTurn, LEASE_MS, RETRY, withAgent } from './store/conformance.js';

/** The sandbox's freeze as a log of what happened when (the runtime is the other boundary faked). */
function freezeLog() {
  const log = {
    frozen: false,
    events: [] as string[],
    async freeze() {
      log.frozen = true;
      log.events.push('freeze');
      return true;
    },
    async thaw() {
      log.frozen = false;
      log.events.push('thaw');
    },
  };
  return log;
}

/**
 * The file blob store, except that a put under checkpoints/ fails while `failing` is set;
 * each such put is logged in `freezes`, with whether the sandbox was frozen.
 */
function flakyBlobs(dir: string, freezes: ReturnType<typeof freezeLog>): BlobStore & { failing: boolean } {
  const real = new FileBlobStore(dir);
  return Object.assign(Object.create(real) as FileBlobStore, {
    failing: false,
    put(
      this: { failing: boolean },
      key: string,
      ...rest: Parameters<BlobStore['put']> extends [string, ...infer R] ? R : never
    ) {
      if (key.startsWith('checkpoints/')) freezes.events.push(freezes.frozen ? 'put, frozen' : 'put');
      if (this.failing && key.startsWith('checkpoints/'))
        return Promise.reject(new BerthError('BLOB_WRITE_FAILED', `Blob ${key} not written (test)`));
      return real.put(key, ...rest);
    },
  });
}

/** A running turn of session s over a committed tree holding old.txt; `mount` gives an attempt its checkpoints. */
async function setUp(t: TestContext) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-turn-checkpoints-'));
  const freezes = freezeLog();
  const blobs = flakyBlobs(join(dataDir, 'blobs'), freezes);
  const workspaces = new Workspaces(dataDir, 1000, blobs);
  const store = await withAgent(async () =>
    openSqliteStore({ path: join(dataDir, 'berth.db'), leaseMs: LEASE_MS, retry: RETRY }),
  );
  await workspaces.prepare();
  t.after(async () => {
    for (const slot of ['first', 'retry']) await workspaces.unmountSlot(slot).catch(() => undefined);
    await store.close();
    await workspaces.release().catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  });
  await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'job', now: BASE });
  const { fence, turn } = await claimAndStartTurn(store, BASE);
  await mkdir(workspaces.committedPath('s'), { recursive: true });
  await writeFile(join(workspaces.committedPath('s'), 'old.txt'), 'old\n');
  const deps = { store, workspaces, blobs, clock: systemClock, runtime: freezes } as unknown as SandboxDeps;
  const log = pino({ level: 'silent' });
  const mount = async (of: Turn, slot: string, maxChain?: number) => {
    await workspaces.mountAttempt('s', of.id, slot);
    const checkpoints = new TurnCheckpoints(deps, fence, slot, log, maxChain);
    const resumed = await checkpoints.resume(of, async () => {
      throw new Error('the chain must restore');
    });
    return { checkpoints, resumed, merged: workspaces.slotPath(slot) };
  };
  /** The turn aborted (its sandbox lost), then a new turn of the same messages. */
  const retryOf = async (cut: Turn): Promise<Turn> => {
    const lost = { ...fence, turnId: cut.id, code: 'SANDBOX_EXITED', error: 'killed' } as const;
    assert.equal(await store.abortTurn(lost, BASE + 1), 'ok');
    const again = await store.startTurn(fence, BASE + RETRY.retryMaxMs);
    const retry = again.code === 'ok' ? again.value!.turn : assert.fail('no retry');
    assert.deepEqual(retry.messageIds, cut.messageIds);
    return retry;
  };
  return { store, blobs, freezes, workspaces, turn, mount, retryOf };
}

test('a checkpoint whose upload fails is never used: the next is a delta over the last recorded one, and a retry restores that chain', async (t) => {
  const { store, blobs, turn, mount, retryOf } = await setUp(t);
  const first = await mount(turn, 'first');
  assert.equal(first.resumed, null, 'a first try starts from the committed tree');
  await writeFile(join(first.merged, 'a.txt'), 'a\n');
  await rm(join(first.merged, 'old.txt'));
  assert.equal((await first.checkpoints.take(turn.id, 'one')).seq, 1);
  await writeFile(join(first.merged, 'b.txt'), 'b\n');
  blobs.failing = true;
  await assert.rejects(first.checkpoints.take(turn.id, 'two'), (e: unknown) =>
    isBerthError(e, 'CHECKPOINT_FAILED'),
  );
  blobs.failing = false;
  await writeFile(join(first.merged, 'c.txt'), 'c\n');
  const third = await first.checkpoints.take(turn.id, 'three: after the failed one');
  assert.equal(third.seq, 2, 'the failed one took no number');
  assert.equal(third.count, 2);
  const rows = await store.listCheckpoints('s', Math.min(...turn.messageIds));
  assert.deepEqual(
    rows.map((r) => [r.seq, r.baseSeq, r.label]),
    [
      [1, 0, 'one'],
      [2, 1, 'three: after the failed one'],
    ],
  );
  const unchanged = await first.checkpoints.take(turn.id, 'four');
  assert.equal(unchanged.bytes, 0, 'nothing changed: a row, no object');

  // The retry: a fresh attempt, restored before anyone sees it.
  const retryTurn = await retryOf(turn);
  const retry = await mount(retryTurn, 'retry');
  assert.deepEqual(retry.resumed, { count: 3, label: 'four' });
  assert.deepEqual((await readdir(retry.merged)).sort(), ['a.txt', 'b.txt', 'c.txt']);
  assert.equal(
    await readFile(join(retry.merged, 'b.txt'), 'utf8'),
    'b\n',
    'what the failed one held came with the next',
  );
  const next = await retry.checkpoints.take(retryTurn.id, 'five');
  assert.equal(next.seq, 4, 'numbered on');
  assert.equal(next.bytes, 0, 'the restored files are its base, not sent again');
});

test('a chain at its bound restarts with a full checkpoint: the retry applies the short chain and keeps the count', async (t) => {
  const { store, turn, mount, retryOf } = await setUp(t);
  const first = await mount(turn, 'first', 2);
  for (let i = 1; i <= 5; i++) {
    await writeFile(join(first.merged, `f${i}.txt`), `${i}\n`);
    if (i === 2) await rm(join(first.merged, 'old.txt'));
    if (i === 4) await rm(join(first.merged, 'f1.txt'));
    assert.equal((await first.checkpoints.take(turn.id, `step-${i}`)).count, i);
  }
  assert.deepEqual(
    (await store.listCheckpoints('s', Math.min(...turn.messageIds))).map((r) => [r.seq, r.baseSeq, r.count]),
    [
      [1, 0, 1],
      [2, 1, 2],
      [3, 0, 3],
      [4, 3, 4],
      [5, 0, 5],
    ],
    'every third checkpoint is a full one over the committed tree',
  );
  const retry = await mount(await retryOf(turn), 'retry', 2);
  assert.deepEqual(retry.resumed, { count: 5, label: 'step-5' });
  assert.deepEqual((await readdir(retry.merged)).sort(), ['f2.txt', 'f3.txt', 'f4.txt', 'f5.txt']);
});

test('at a model call, a turn that changed nothing records nothing; one that changed records a model-call checkpoint', async (t) => {
  const { store, turn, mount } = await setUp(t);
  const first = await mount(turn, 'first');
  await writeFile(join(first.merged, 'a.txt'), 'a\n');
  const taken = await first.checkpoints.takeAtModelCall(turn.id);
  assert.deepEqual([taken?.seq, taken?.label], [1, MODEL_CALL_LABEL]);
  assert.equal(await first.checkpoints.takeAtModelCall(turn.id), null, 'nothing changed: nothing recorded');
  await writeFile(join(first.merged, 'a.txt'), 'a again\n');
  assert.equal((await first.checkpoints.takeAtModelCall(turn.id))?.seq, 2);
  assert.deepEqual(
    (await store.listCheckpoints('s', Math.min(...turn.messageIds))).map((r) => [r.seq, r.baseSeq]),
    [
      [1, 0],
      [2, 1],
    ],
  );
});

test('the sandbox is frozen for the scan and pack only: thawed before the upload, and thawed when the capture fails', async (t) => {
  const { freezes, workspaces, turn, mount } = await setUp(t);
  const first = await mount(turn, 'first');
  await writeFile(join(first.merged, 'a.txt'), 'a\n');
  await first.checkpoints.take(turn.id, 'one');
  assert.deepEqual(freezes.events, ['freeze', 'thaw', 'put'], 'uploaded once thawed');
  freezes.events.length = 0;
  assert.equal(await first.checkpoints.takeAtModelCall(turn.id), null);
  assert.deepEqual(freezes.events, ['freeze', 'thaw'], 'nothing changed: frozen for the scan, nothing put');
  freezes.events.length = 0;
  await workspaces.unmountSlot('first');
  await assert.rejects(first.checkpoints.take(turn.id, 'two'), (e: unknown) =>
    isBerthError(e, 'CHECKPOINT_FAILED'),
  );
  assert.deepEqual(freezes.events, ['freeze', 'thaw'], 'a scan that fails still thaws');
  assert.equal(freezes.frozen, false);
});
