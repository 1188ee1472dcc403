/**
 * The PostgreSQL store on a replicated database that fails over: a real Patroni cluster
 * (two members, synchronous replication, one etcd; helpers/patroni.ts), its primary's
 * postmaster SIGKILLed, its primary demoted, its primary's machine lost (link cut, then
 * Patroni and PostgreSQL SIGKILLed) while writers keep writing. Every acknowledged write
 * must be on the new primary exactly once, and callers must see latency, not errors.
 * Needs root, Patroni and etcd (scripts/ensure-patroni.sh).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pg from 'pg';
import { firstCommitAfter } from '../src/chaos/store-failover.js';
import { checkWrites, streamWrites, type Write } from '../src/chaos/write-stream.js';
import { agentSpecSchema, isBerthError } from '../src/core/index.js';
import { openPostgresStore, type Store } from '../src/store/index.js';
import { freshPatroniDatabase, testPatroni } from './helpers/patroni.js';
import { LEASE_MS, RETRY } from './store/conformance.js';

const asRoot = process.getuid?.() === 0;
const skip = !asRoot && 'needs root (network namespaces, Patroni as postgres)';
const WRITERS = 6;

interface Warning {
  at: number;
  message: string;
  error: string;
}

async function openLogged(url: string): Promise<{ store: Store; warnings: Warning[] }> {
  const warnings: Warning[] = [];
  const store = await openPostgresStore({
    url,
    leaseMs: LEASE_MS,
    retry: RETRY,
    onWarning: (message, err) =>
      warnings.push({ at: Date.now(), message, error: (err as Error)?.message ?? String(err) }),
  });
  await store
    .createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), store.clock.now())
    .catch((err: unknown) => {
      if (!isBerthError(err, 'AGENT_EXISTS')) throw err;
    });
  return { store, warnings };
}

/** Writers until `stop`, on sessions writer-0 … */
function writeUntil(store: Store, stop: Promise<unknown>): Promise<Write[]> {
  return streamWrites(store, { writers: WRITERS, agent: 'sh', prefix: 'writer', stop });
}

/** Every acknowledged write is stored once, with the id it was acknowledged with; a failed one at most once. */
async function assertAllStored(url: string, writes: Write[]): Promise<void> {
  const reader = await openPostgresStore({ url, leaseMs: LEASE_MS, retry: RETRY });
  try {
    const { lost, duplicated } = await checkWrites(reader, writes);
    assert.deepEqual(
      lost.map((w) => w.text),
      [],
      'no acknowledged write lost',
    );
    assert.deepEqual(
      duplicated.map((w) => w.text),
      [],
      'no write stored twice',
    );
  } finally {
    await reader.close();
  }
}

/** When berth first committed on the new primary, after its promotion (its commit marker's time), epoch ms. */
async function firstCommitOnNewPrimary(url: string, old: string): Promise<number | null> {
  const cluster = await testPatroni();
  const leader = await cluster.waitForLeader({ notMember: old, standby: false });
  const promotedAt = await cluster.promotedAt(leader);
  return promotedAt === null
    ? null
    : firstCommitAfter(cluster.memberUrl(leader, databaseOf(url)), promotedAt);
}

function summary(writes: Write[], warnings: Warning[], at: number, firstCommit: number | null): string {
  const latency = writes.map((w) => w.endedAt - w.startedAt).sort((a, b) => a - b);
  const firstFailure = warnings.find((w) => w.at >= at);
  const lostCommits = warnings.filter((w) => w.message.includes('COMMIT was lost')).length;
  return (
    `${writes.length} writes, ${writes.filter((w) => w.error).length} failed; latency max ${latency.at(-1)} ms; ` +
    `MTTD ${firstFailure ? firstFailure.at - at : '-'} ms (first failed call), ` +
    `MTTR ${firstCommit === null ? '-' : firstCommit - at} ms (first commit on the new primary); ` +
    `${lostCommits} retries settling a lost COMMIT answer by its marker`
  );
}

test('patroni: a multi-host URL whose first host is a standby connects to the primary; a standby alone is refused once the retry budget is spent', {
  skip,
}, async () => {
  const cluster = await testPatroni();
  const url = await freshPatroniDatabase();
  const database = databaseOf(url);
  const leader = await cluster.waitForLeader();
  const standby = cluster.members.find((m) => m !== leader)!;
  const { store } = await openLogged(cluster.url(database, [standby, leader]));
  try {
    await store.enqueueMessage({
      sessionId: 's',
      agent: 'sh',
      text: 'to the primary',
      now: store.clock.now(),
    });
    const direct = new pg.Client({ connectionString: cluster.memberUrl(leader, database) });
    await direct.connect();
    const { rows } = await direct.query("SELECT count(*) AS n FROM messages WHERE text = 'to the primary'");
    await direct.end();
    assert.equal(Number(rows[0].n), 1, 'written on the primary');
  } finally {
    await store.close();
  }
  // At open a standby is waited for (a failover may be under way), within the retry budget.
  await assert.rejects(
    openPostgresStore({
      url: cluster.url(database, [standby]),
      leaseMs: LEASE_MS,
      retry: RETRY,
      retryBudgetMs: 2000,
    }),
    (e: unknown) => isBerthError(e, 'STORE_UNAVAILABLE') && /standby \(in recovery\)/.test(e.message),
  );
});

test('patroni: the primary’s postmaster SIGKILLed under a stream of writes: every acknowledged write is on the new primary once, no caller sees an error, notifications resume', {
  skip,
}, async (t) => {
  const cluster = await testPatroni();
  const url = await freshPatroniDatabase();
  const { store, warnings } = await openLogged(url);
  const { store: listener } = await openLogged(url);
  try {
    let kill: { member: string; at: number } | null = null;
    const writes = await writeUntil(
      store,
      (async () => {
        await new Promise((r) => setTimeout(r, 1000));
        kill = await cluster.killPrimaryPostmaster();
        await cluster.waitForLeader({ notMember: kill.member, standby: false });
        await new Promise((r) => setTimeout(r, 2000));
      })(),
    );
    const { member, at } = kill!;
    t.diagnostic(
      `killed ${member}'s postmaster: ${summary(writes, warnings, at, await firstCommitOnNewPrimary(url, member))}`,
    );
    assert.deepEqual(
      writes.filter((w) => w.error).map((w) => w.error),
      [],
      'no caller saw an error',
    );
    assert.ok(
      writes.some((w) => w.startedAt > at),
      'writes went on after the kill',
    );
    await assertAllStored(url, writes);
    const heard = await untilHeard(store, listener, 'after-failover');
    assert.ok(heard, 'the listener follows the primary');
  } finally {
    await Promise.all([store.close(), listener.close()]);
  }
  await cluster.waitForLeader();
});

test('patroni: a primary that turns read-only (25006), then is demoted by a switchover: the write waiting meanwhile lands once on the new primary', {
  skip,
}, async () => {
  const cluster = await testPatroni();
  const url = await freshPatroniDatabase();
  const database = databaseOf(url);
  const { store, warnings } = await openLogged(url);
  const leader = await cluster.waitForLeader();
  const standby = cluster.members.find((m) => m !== leader)!;
  const admin = async (member: string, sql: string) => {
    const c = new pg.Client({ connectionString: cluster.memberUrl(member) });
    await c.connect();
    try {
      for (const q of sql.split(';').filter((x) => x.trim())) await c.query(q);
    } finally {
      await c.end();
    }
  };
  try {
    await store.enqueueMessage({ sessionId: 'ro', agent: 'sh', text: 'before', now: store.clock.now() });
    await admin(leader, 'ALTER SYSTEM SET default_transaction_read_only = on; SELECT pg_reload_conf()');
    // The reload is asynchronous: once a new backend starts read-only, the postmaster has passed it to
    // every backend (the store's pooled ones too), so the write below meets a read-only primary.
    await waitUntilAsync(async () => {
      const c = new pg.Client({ connectionString: cluster.memberUrl(leader) });
      await c.connect();
      try {
        return (
          (await c.query('SHOW default_transaction_read_only')).rows[0].default_transaction_read_only === 'on'
        );
      } finally {
        await c.end();
      }
    }, 10_000);
    const during = store.enqueueMessage({
      sessionId: 'ro',
      agent: 'sh',
      text: 'during',
      now: store.clock.now(),
    });
    await waitUntil(() => warnings.some((w) => /read-only/.test(w.error)), 10_000);
    await cluster.switchover(standby);
    const { message } = await during;
    const direct = new pg.Client({
      connectionString: cluster.memberUrl(
        await cluster.waitForLeader({ notMember: leader, standby: false }),
        database,
      ),
    });
    await direct.connect();
    const { rows } = await direct.query(
      "SELECT id FROM messages WHERE session_id = 'ro' AND text = 'during'",
    );
    await direct.end();
    assert.deepEqual(
      rows.map((r) => Number(r.id)),
      [message.id],
      'once, on the new primary',
    );
    assert.ok(
      warnings.some((w) => /read-only transaction/.test(w.error)),
      `the refusal was seen: ${warnings.map((w) => w.error).join(' | ')}`,
    );
  } finally {
    await store.close();
    // The demoted member restarts as a replica: once it is back, it must not stay read-only for the next test.
    await cluster.waitForLeader();
    await admin(leader, 'ALTER SYSTEM RESET default_transaction_read_only; SELECT pg_reload_conf()');
  }
});

test('patroni: the primary’s machine lost (link cut, then everything SIGKILLed) under a stream of writes: stuck connections are dropped, and every acknowledged write is on the new primary once', {
  skip,
}, async (t) => {
  const cluster = await testPatroni();
  const url = await freshPatroniDatabase();
  const { store, warnings } = await openLogged(url);
  const leader = await cluster.waitForLeader();
  try {
    let at = 0;
    const writes = await writeUntil(
      store,
      (async () => {
        await new Promise((r) => setTimeout(r, 1000));
        at = (await cluster.killMember(leader)).at;
        await cluster.waitForLeader({ notMember: leader, standby: false });
        await new Promise((r) => setTimeout(r, 2000));
      })(),
    );
    t.diagnostic(
      `lost ${leader}: ${summary(writes, warnings, at, await firstCommitOnNewPrimary(url, leader))}`,
    );
    assert.deepEqual(
      writes.filter((w) => w.error).map((w) => w.error),
      [],
      'no caller saw an error',
    );
    assert.ok(
      warnings.some((w) => w.message.includes('stopped answering')),
      'connections stuck on the vanished server were dropped',
    );
    await assertAllStored(url, writes);
  } finally {
    await store.close();
    // The last test of the file: the lost member is started again, but nothing waits for it to rejoin.
    await cluster.startMember(leader);
  }
});

async function untilHeard(writer: Store, listener: Store, sessionId: string): Promise<boolean> {
  let heard = false;
  const off = listener.onChange((c) => {
    if (c.type === 'enqueued' && c.sessionId === sessionId) heard = true;
  });
  for (let i = 0; i < 100 && !heard; i++) {
    await writer.enqueueMessage({ sessionId, agent: 'sh', text: `m${i}`, now: writer.clock.now() });
    await new Promise((r) => setTimeout(r, 200));
  }
  off();
  return heard;
}

/** The database of a multi-host URL (`postgres://u@h1,h2/<database>?…`). */
function databaseOf(url: string): string {
  return url.split('/')[3]!.split('?')[0]!;
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<void> {
  await waitUntilAsync(async () => check(), timeoutMs);
}

async function waitUntilAsync(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
}
