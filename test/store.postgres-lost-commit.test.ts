/**
 * A COMMIT whose answer is lost (the connection breaks after the COMMIT was sent): the
 * PostgreSQL store learns the outcome from the transaction's commit marker instead of
 * failing with STORE_UNAVAILABLE. The connection is cut for real, by a relay that reads
 * the wire protocol (helpers/commit-cutter.ts).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { agentSpecSchema } from '../src/core/index.js';
import { openPostgresStore } from '../src/store/index.js';
import { type CutPoint, startCommitCutter } from './helpers/commit-cutter.js';
import { freshDatabase } from './helpers/postgres.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

async function markerCount(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return Number((await client.query('SELECT count(*) AS n FROM commit_markers')).rows[0].n);
  } finally {
    await client.end();
  }
}

/** One enqueue through a relay armed to cut its COMMIT at `point`: what the call returned, what is stored, the markers around it. */
async function enqueueThroughCut(point: CutPoint) {
  const url = await freshDatabase();
  const cutter = await startCommitCutter(url);
  const store = await openPostgresStore({ url: cutter.url, leaseMs: LEASE_MS, retry: RETRY });
  try {
    await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
    const markersBefore = await markerCount(url);
    const cut = cutter.armOnce(point);
    const { message } = await store.enqueueMessage({
      sessionId: 's',
      agent: 'sh',
      text: 'once',
      now: Date.now(),
    });
    return {
      serverStatus: await cut,
      stored: (await store.listMessages('s', 0, 10)).map((m) => [m.id, m.text]),
      returned: [message.id, message.text],
      newMarkers: (await markerCount(url)) - markersBefore,
    };
  } finally {
    await store.close();
    await cutter.close();
  }
}

test('postgres: a COMMIT that landed but whose answer was lost returns what the transaction computed, written once', async () => {
  const r = await enqueueThroughCut('after-commit-answer');
  assert.equal(r.serverStatus, 'I', 'the server committed and was idle again when the connection was cut');
  assert.deepEqual(r.stored, [r.returned], 'written once; the id returned is the stored one');
  assert.equal(r.newMarkers, 0, 'the checked marker was deleted');
});

test('postgres: a COMMIT cut before it reached the server is run again, written once', async () => {
  const r = await enqueueThroughCut('before-commit');
  assert.equal(r.serverStatus, null, 'cut before the COMMIT');
  assert.deepEqual(r.stored, [r.returned], 'written once, by the second run');
  assert.equal(r.newMarkers, 1, "the second run's marker stays (until pruned)");
});

test('postgres: commit markers: a write that changed nothing adds none, and markers older than minutes are pruned by a write', async () => {
  const url = await freshDatabase();
  const store = await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query(
    "INSERT INTO commit_markers (marker, created_at) VALUES (gen_random_uuid(), now() - interval '1 hour')",
  );
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
  assert.equal(await markerCount(url), 1, "the stale marker is gone; the agent's write left its own");
  assert.equal(await store.claimRunnableSession('w', Date.now()), null);
  assert.equal(await markerCount(url), 1, 'a claim that found nothing wrote nothing and left no marker');
  await client.end();
  await store.close();
});
