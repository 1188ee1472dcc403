/**
 * The garbage pass over chat files, on real blobs (file blob store) and a real store
 * (SQLite): what a queued message or an unsent outbox row names is kept, what a committed
 * message named and what no row ever named (a crash before the inbound's commit) go once
 * past the grace, and nothing goes before it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { FileBlobStore } from '../src/blobs/index.js';
import { CHANNEL_FILES_GRACE_MS, CHANNEL_FILES_PREFIX } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { collectChannelFiles } from '../src/worker/channel-files-gc.js';
import { CHANNEL, update } from './store/channels.js';
import { BASE, claimAndStartTurn, LEASE_MS, RETRY, withAgent } from './store/conformance.js';

test('channel files gc: a queued message’s file and an unsent file stay, a committed message’s file and an orphan go after the grace', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-channel-files-gc-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const blobs = new FileBlobStore(dir);
  await blobs.check();
  const store = await withAgent(async () =>
    openSqliteStore({ path: ':memory:', leaseMs: LEASE_MS, retry: RETRY }),
  );
  t.after(() => store.close());
  await store.createChannel(CHANNEL, BASE);
  assert.equal(await store.takeChannelLease('tg1', 'p1', BASE, LEASE_MS), true);

  const file = async (key: string) => {
    await blobs.put(key, Readable.from([Buffer.from(key)]), { maxBytes: 1000 });
    return { name: 'a.txt', key, size: key.length };
  };
  const done = await file(`${CHANNEL_FILES_PREFIX}tg1/100-1001-0`);
  const outbox = await file(`${CHANNEL_FILES_PREFIX}out/s/t-0`);
  assert.equal(
    await store.commitChannelInbound('tg1', 'p1', update(1, { files: [done] }), BASE + 1),
    'enqueue',
  );
  const { fence, turn } = await claimAndStartTurn(store, BASE + 2);
  const committed = await store.commitTurn(
    {
      ...fence,
      turnId: turn.id,
      outputs: [{ text: 'done' }],
      workspace: { baseVersion: 0, layer: null, outbox: [outbox] },
    },
    BASE + 3,
  );
  assert.equal(committed, 'ok');
  const queued = await file(`${CHANNEL_FILES_PREFIX}tg1/100-1002-0`);
  assert.equal(
    await store.commitChannelInbound('tg1', 'p1', update(2, { files: [queued] }), BASE + 4),
    'enqueue',
  );
  // Stored for a message whose commit never came.
  const orphan = await file(`${CHANNEL_FILES_PREFIX}tg1/100-1003-0`);

  const keys = async () => (await blobs.list(CHANNEL_FILES_PREFIX)).objects.map((o) => o.key).sort();
  const all = [done.key, outbox.key, queued.key, orphan.key].sort();
  assert.equal(await collectChannelFiles(store, blobs, Date.now()), 0, 'young files are never collected');
  assert.deepEqual(await keys(), all);
  const later = Date.now() + CHANNEL_FILES_GRACE_MS + 60_000;
  assert.equal(await collectChannelFiles(store, blobs, later), 2);
  assert.deepEqual(await keys(), [outbox.key, queued.key].sort(), 'what a row still needs is kept');
  assert.equal(await collectChannelFiles(store, blobs, later), 0, 'a second pass finds nothing more');
});
