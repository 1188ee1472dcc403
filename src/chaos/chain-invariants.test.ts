import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { messageRow } from '../../test/helpers/message-row.js';
import { turnRow } from '../../test/helpers/turn-row.js';
import { FileBlobStore } from '../blobs/index.js';
import type { ChainEntry, Turn } from '../core/index.js';
import { packTree } from '../workspace/index.js';
import { checkChains } from './chain-invariants.js';
import type { InvariantResult } from './invariant-result.js';
import type { SessionSnapshot } from './snapshot.js';
import { expectedLog, LOG_FILE, turnPlan } from './workload.js';

async function scratch(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-chain-test-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** An object whose tree is `files`, put into the blob store under `key`; its chain entry. */
async function object(
  blobs: FileBlobStore,
  dir: string,
  key: string,
  files: Record<string, string>,
  entry: Omit<ChainEntry, 'key' | 'size'>,
): Promise<ChainEntry> {
  const tree = join(dir, `tree-${key.replace(/\W/g, '-')}`);
  await mkdir(tree, { recursive: true });
  for (const [path, content] of Object.entries(files)) await writeFile(join(tree, path), content);
  const put = await blobs.put(key, packTree(tree), { maxBytes: 1 << 20 });
  return { ...entry, key, size: put.size };
}

/** Inbound message `id` of session `sessionId`, holding the workload's plan of turn `id`. */
function workloadMessage(sessionId: string, id: number) {
  return messageRow({
    id,
    sessionId,
    text: JSON.stringify(turnPlan(0, id, { session: sessionId, seed: 1 })),
  });
}

/**
 * A session whose k turns committed one after another, each on the version before it, each
 * taking message v (the workload's turn v), each with its layer (the whole log.txt, as an
 * append copies it up) in the blob store.
 */
async function goodSession(
  blobs: FileBlobStore,
  dir: string,
  id: string,
  k: number,
): Promise<SessionSnapshot> {
  const turns: Turn[] = [];
  const entries: ChainEntry[] = [];
  for (let v = 1; v <= k; v++) {
    const turnId = `${id}-t${v}`;
    turns.push(turnRow({ id: turnId, sessionId: id, baseVersion: v - 1, messageIds: [v] }));
    entries.push(
      await object(
        blobs,
        dir,
        `layers/${id}-${v}`,
        { [LOG_FILE]: expectedLog(v) },
        { version: v, kind: 'layer', turnId },
      ),
    );
  }
  return {
    id,
    view: null,
    messages: Array.from({ length: k }, (_, i) => workloadMessage(id, i + 1)),
    turns,
    state: {},
    events: [],
    chain: { sessionId: id, version: k, entries },
  };
}

async function blobStore(t: TestContext): Promise<{ blobs: FileBlobStore; dir: string }> {
  const dir = await scratch(t);
  const blobs = new FileBlobStore(join(dir, 'blobs'));
  await blobs.check();
  return { blobs, dir };
}

const named = (results: InvariantResult[], name: string) => results.find((r) => r.name === name)!;

test('chain invariants hold for chains that are what their committed turns wrote', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const sessions = [await goodSession(blobs, dir, 's1', 3), await goodSession(blobs, dir, 's2', 0)];
  const { results, committedTrees } = await checkChains(sessions, blobs, new Map());
  for (const r of results) assert.ok(r.passed, `${r.name}: ${r.details.join('\n')}`);
  assert.deepEqual(
    results.map((r) => r.name),
    ['chain-objects-present', 'workspace-from-chain', 'never-behind'],
  );
  assert.deepEqual(committedTrees.get('s1'), new Map([[LOG_FILE, expectedLog(3)]]));
  assert.deepEqual(committedTrees.get('s2'), new Map());
});

test('a snapshot and the layers after it materialise as the whole workspace', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 4);
  const snapshot = await object(
    blobs,
    dir,
    'snapshots/s1-2',
    { [LOG_FILE]: expectedLog(2) },
    { version: 2, kind: 'snapshot', turnId: null },
  );
  s.chain.entries = [snapshot, ...s.chain.entries.filter((e) => e.version > 2)];
  const { results } = await checkChains([s], blobs, new Map());
  for (const r of results) assert.ok(r.passed, `${r.name}: ${r.details.join('\n')}`);
});

test('chain-objects-present fails when an object a chain names is gone from the blob store', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 3);
  await blobs.delete(s.chain.entries[1]!.key);
  const { results, committedTrees } = await checkChains([s], blobs, new Map());
  const present = named(results, 'chain-objects-present');
  assert.equal(present.passed, false);
  assert.match(present.details.join('\n'), /s1: layer of version 2 .* is not in the blob store/);
  assert.equal(named(results, 'workspace-from-chain').passed, false, 'it cannot be materialised either');
  assert.equal(committedTrees.get('s1'), null);
});

test('workspace-from-chain fails when a layer holds other files than the committed turns wrote', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 3);
  // A turn's partial write (1:a without 1:b) and a stray file made it into the chain.
  s.chain.entries[0] = await object(
    blobs,
    dir,
    'layers/s1-1-partial',
    { [LOG_FILE]: '1:a\n', 'stray.txt': 'x' },
    { version: 1, kind: 'layer', turnId: 's1-t1' },
  );
  const { results } = await checkChains([s], blobs, new Map());
  const fromChain = named(results, 'workspace-from-chain');
  assert.equal(fromChain.passed, false);
  assert.match(
    fromChain.details.join('\n'),
    /s1: at version 1 no committed message wrote stray\.txt; log\.txt is "1:a\\n", expected "1:a\\n1:b\\n"/,
  );
  assert.ok(named(results, 'chain-objects-present').passed);
});

test('workspace-from-chain fails when the chain ends short of the committed turns', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 3);
  s.chain.entries.pop();
  s.chain.version = 2;
  const { results } = await checkChains([s], blobs, new Map());
  assert.match(
    named(results, 'workspace-from-chain').details.join('\n'),
    /s1: the chain is at version 2 \(its newest object 2\), but 3 turns committed/,
  );
});

test('never-behind fails when two committed turns ran on the same version', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 3);
  s.turns[2]!.baseVersion = 1;
  const { results } = await checkChains([s], blobs, new Map());
  const behind = named(results, 'never-behind');
  assert.equal(behind.passed, false);
  assert.match(behind.details.join('\n'), /s1: its committed turns ran on versions \[0,1,1\], not 0\.\.2/);
  assert.match(
    behind.details.join('\n'),
    /the layer of version 3 comes from turn s1-t3, which ran on version 1/,
  );
});

/** A turn of message `messageId` whose opening log.txt check failed, as the runner records it (its failedStep). */
function failedLogCheck(
  s: SessionSnapshot,
  turnId: string,
  o: { messageId: number; found: string | null; expected: string; attempt?: number },
): void {
  s.turns.push(
    turnRow({
      id: turnId,
      status: 'aborted',
      errorCode: 'STEP_FAILED',
      attempt: o.attempt ?? 1,
      messageIds: [o.messageId],
    }),
  );
  const assertion = { subject: LOG_FILE, found: o.found, expected: o.expected };
  s.events.push({
    id: s.events.length + 1,
    sessionId: s.id,
    type: 'progress',
    data: { turnId, failedStep: { messageId: o.messageId, index: 0, kind: 'assertFile', assertion } },
    createdAt: 0,
  });
}

test('never-behind fails when a turn found an older committed log.txt at its start', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 3);
  failedLogCheck(s, 's1-stale', {
    messageId: 3,
    found: expectedLog(1),
    expected: expectedLog(2),
    attempt: 2,
  });
  // A partial read (a half-written turn seen) is another invariant's finding, not this one's.
  failedLogCheck(s, 's1-partial', { messageId: 2, found: '1:a\n', expected: expectedLog(1) });
  const { results } = await checkChains([s], blobs, new Map());
  const behind = named(results, 'never-behind');
  assert.deepEqual(behind.details, [
    's1: turn s1-stale (attempt 2) found the log of 1 messages where 2 had committed',
  ]);
});

test('never-behind reads the whole log the check found, however many messages wrote it', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 1);
  // 40 messages' log is far past the 200 characters an error's text quotes.
  failedLogCheck(s, 's1-long', { messageId: 41, found: expectedLog(39), expected: expectedLog(40) });
  const { results } = await checkChains([s], blobs, new Map());
  assert.deepEqual(named(results, 'never-behind').details, [
    's1: turn s1-long (attempt 1) found the log of 39 messages where 40 had committed',
  ]);
});

test('never-behind counts a turn that found no log.txt at all as one on version 0', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 1);
  failedLogCheck(s, 's1-empty', { messageId: 2, found: null, expected: expectedLog(1) });
  const { results } = await checkChains([s], blobs, new Map());
  assert.deepEqual(named(results, 'never-behind').details, [
    's1: turn s1-empty (attempt 1) found the log of 0 messages where 1 had committed',
  ]);
});

test('workspace-from-chain: a turn that took several messages holds the writes of each at its one version', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 2);
  // Turn 2 took messages 2 and 3 (one burst): version 2 is the log of three messages.
  s.turns[1]!.messageIds = [2, 3];
  s.messages.push(workloadMessage('s1', 3));
  s.chain.entries[1] = await object(
    blobs,
    dir,
    'layers/s1-2-batch',
    { [LOG_FILE]: expectedLog(3) },
    { version: 2, kind: 'layer', turnId: 's1-t2' },
  );
  const { results, committedTrees } = await checkChains([s], blobs, new Map());
  for (const r of results) assert.ok(r.passed, `${r.name}: ${r.details.join('\n')}`);
  assert.equal(committedTrees.get('s1')?.get(LOG_FILE), expectedLog(3));
  // The same chain for a turn that took one message: version 2 holds a message too many.
  s.turns[1]!.messageIds = [2];
  assert.match(
    named((await checkChains([s], blobs, new Map())).results, 'workspace-from-chain').details.join('\n'),
    /s1: at version 2 log\.txt is ".*3:b\\n", expected ".*2:b\\n"/,
  );
});

test('never-behind excuses a message that found an older log only when an earlier message of its session failed', async (t) => {
  const { blobs, dir } = await blobStore(t);
  const s = await goodSession(blobs, dir, 's1', 1);
  // Message 3 expected the log of two messages; message 2 failed for good, so it found one.
  failedLogCheck(s, 's1-t3', { messageId: 3, found: expectedLog(1), expected: expectedLog(2) });
  const behind = async (excused: Map<number, string>) =>
    named((await checkChains([s], blobs, excused)).results, 'never-behind');
  const line = 's1: turn s1-t3 (attempt 1) found the log of 1 messages where 2 had committed';
  assert.deepEqual((await behind(new Map())).details, [line]);
  const excused = await behind(new Map([[3, 'it came after s1 turn 2 (message 2) ended fail']]));
  assert.ok(excused.passed);
  assert.deepEqual(excused.excused, [`${line} [message 3: it came after s1 turn 2 (message 2) ended fail]`]);
  assert.deepEqual(
    (await behind(new Map([[2, 'another message']]))).details,
    [line],
    'excused: another message',
  );
});
