/**
 * A COMMIT whose answer is lost (the connection breaks after the COMMIT was sent): the
 * PostgreSQL store learns the outcome from the transaction's commit marker instead of
 * failing with STORE_UNAVAILABLE. The connection is cut for real, by a relay that reads
 * the wire protocol (helpers/commit-cutter.ts).
 */
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import pg from 'pg';
import { agentSpecSchema } from '../src/core/index.js';
import { openPostgresStore } from '../src/store/index.js';
import { markerCommitted } from '../src/store/postgres/commit-marker.js';
import { type CutPoint, startCommitCutter } from './helpers/commit-cutter.js';
import { freshDatabase } from './helpers/postgres.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

/** Markers by who wrote them: the transactions that carried them, or probes that found them missing. */
async function markers(url: string): Promise<{ committed: number; probes: number }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(
      'SELECT count(*) FILTER (WHERE NOT probe) AS committed, count(*) FILTER (WHERE probe) AS probes FROM commit_markers',
    );
    return { committed: Number(rows[0].committed), probes: Number(rows[0].probes) };
  } finally {
    await client.end();
  }
}

async function markerCount(url: string): Promise<number> {
  const { committed, probes } = await markers(url);
  return committed + probes;
}

/** One enqueue through a relay armed to cut its COMMIT at `point`: what the call returned, what is stored, the markers around it. */
async function enqueueThroughCut(point: CutPoint) {
  const url = await freshDatabase();
  const cutter = await startCommitCutter(url);
  const store = await openPostgresStore({ url: cutter.url, leaseMs: LEASE_MS, retry: RETRY });
  try {
    await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), Date.now());
    const before = await markers(url);
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
      newMarkers: await markers(url).then((m) => ({
        committed: m.committed - before.committed,
        probes: m.probes - before.probes,
      })),
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
  assert.deepEqual(
    r.newMarkers,
    { committed: 1, probes: 0 },
    "the probe found the transaction's marker and left it (until pruned): asked again, it answers the same",
  );
});

test('postgres: a COMMIT cut before it reached the server is run again, written once', async () => {
  const r = await enqueueThroughCut('before-commit');
  assert.equal(r.serverStatus, null, 'cut before the COMMIT');
  assert.deepEqual(r.stored, [r.returned], 'written once, by the second run');
  assert.deepEqual(
    r.newMarkers,
    { committed: 1, probes: 1 },
    "the probe's row says the first run never committed; the second run's marker is the one that committed",
  );
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

test('postgres: a commit marker asked about twice answers the same, committed or not (a probe whose own answer was lost asks again)', async () => {
  const url = await freshDatabase();
  const store = await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  await store.close(); // migrated
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const connection = { query: (q: string, v?: unknown[]) => client.query(q, v), release: () => undefined };
  try {
    const landed = randomUUID();
    await client.query('BEGIN');
    await client.query('INSERT INTO commit_markers (marker) VALUES ($1)', [landed]);
    await client.query('COMMIT');
    const lost = randomUUID();
    const answers = [];
    for (const marker of [landed, landed, lost, lost])
      answers.push(await markerCommitted(connection, marker));
    assert.deepEqual(answers, [true, true, false, false]);
  } finally {
    await client.end();
  }
});
