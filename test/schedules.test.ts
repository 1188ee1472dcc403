/**
 * Scheduled messages against a real SQLite file shared by two store handles (two host
 * processes): a due run is sent once whoever looks; runs missed while the host was down
 * are sent once or skipped by policy; pause, resume and cancel; bad input is refused.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { agentSpecSchema, firstRunOf, type MissedPolicy } from '../src/core/index.js';
import { openSqliteStore, type Store } from '../src/store/index.js';

const open = (path: string) =>
  openSqliteStore({ path, leaseMs: 10_000, retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 } });
const T0 = Date.parse('2026-11-30T07:00:00Z'); // 08:00 in Paris
const DAY = 86_400_000;

async function setUp(t: TestContext, missed: MissedPolicy) {
  const dir = await mkdtemp(join(tmpdir(), 'berth-sched-'));
  const stores: Store[] = [open(join(dir, 'berth.db')), open(join(dir, 'berth.db'))];
  t.after(async () => {
    for (const s of stores) await s.close();
    await rm(dir, { recursive: true, force: true });
  });
  const [a] = stores as [Store, Store];
  await a.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), T0);
  const cron = '0 9 * * *';
  const tz = 'Europe/Paris';
  const schedule = await a.createSchedule(
    {
      sessionId: 'daily',
      agent: 'sh',
      cron,
      tz,
      message: 'echo report',
      missed,
      nextRunAt: firstRunOf(cron, tz, T0),
    },
    T0,
  );
  const inbound = async () =>
    (await a.listMessages('daily', 0, 100)).filter((m) => m.direction === 'in').length;
  return { stores, schedule, inbound };
}

test('a due run is sent once, even with two processes looking at the same instant', async (t) => {
  const { stores, schedule, inbound } = await setUp(t, 'once');
  assert.equal(schedule.nextRunAt, Date.parse('2026-11-30T08:00:00Z'));
  const due = schedule.nextRunAt! + 300;
  const results = await Promise.all(stores.map((s) => s.runDueSchedules(due)));
  assert.deepEqual(
    results.flatMap((r) => r.fired),
    [schedule.id],
  );
  assert.equal(await inbound(), 1);
  assert.deepEqual((await stores[1]!.runDueSchedules(due + 500)).fired, []);
  const [after] = await stores[0]!.listSchedules('daily');
  assert.equal(after!.runs, 1);
  assert.equal(after!.nextRunAt, Date.parse('2026-12-01T08:00:00Z'));
});

test('runs missed while no host ran: policy once sends one, then waits for the next after now', async (t) => {
  const { stores, schedule, inbound } = await setUp(t, 'once');
  const back = schedule.nextRunAt! + 3 * DAY + 3_600_000; // three days and an hour later
  assert.deepEqual((await stores[1]!.runDueSchedules(back)).fired, [schedule.id]);
  assert.deepEqual((await stores[0]!.runDueSchedules(back + 1000)).fired, []);
  assert.equal(await inbound(), 1);
  assert.equal((await stores[0]!.listSchedules('daily'))[0]!.nextRunAt, Date.parse('2026-12-04T08:00:00Z'));
});

test('runs missed while no host ran: policy skip sends none and moves on', async (t) => {
  const { stores, schedule, inbound } = await setUp(t, 'skip');
  const back = schedule.nextRunAt! + 2 * DAY;
  assert.deepEqual(await stores[0]!.runDueSchedules(back), { fired: [], skipped: [schedule.id] });
  assert.equal(await inbound(), 0);
  const [after] = await stores[0]!.listSchedules(null);
  assert.equal(after!.runs, 0);
  assert.equal(after!.nextRunAt, Date.parse('2026-12-03T08:00:00Z'));
  // The next run, on time, is sent.
  assert.deepEqual((await stores[0]!.runDueSchedules(after!.nextRunAt! + 10)).fired, [schedule.id]);
  assert.equal(await inbound(), 1);
});

test('pause holds runs back, resume starts from the next time after now, cancel is final', async (t) => {
  const { stores, schedule, inbound } = await setUp(t, 'once');
  const [a] = stores as [Store, Store];
  const paused = await a.moveScheduleTo(schedule.id, 'paused', T0);
  assert.equal(paused.status, 'paused');
  assert.deepEqual((await a.runDueSchedules(schedule.nextRunAt! + 2 * DAY)).fired, []);
  const resumed = await a.moveScheduleTo(schedule.id, 'active', schedule.nextRunAt! + 2 * DAY);
  assert.equal(
    resumed.nextRunAt,
    Date.parse('2026-12-03T08:00:00Z'),
    'runs that fell while paused are not sent',
  );
  const cancelled = await a.moveScheduleTo(schedule.id, 'cancelled', T0);
  assert.equal(cancelled.nextRunAt, null);
  await assert.rejects(a.moveScheduleTo(schedule.id, 'active', T0), { code: 'SCHEDULE_CANCELLED' });
  await assert.rejects(a.moveScheduleTo('sch_nope', 'paused', T0), { code: 'SCHEDULE_NOT_FOUND' });
  assert.deepEqual((await a.runDueSchedules(T0 + 10 * DAY)).fired, []);
  assert.equal(await inbound(), 0);
});

test('a schedule needs a session or an agent that exists, a valid cron and a known zone', async (t) => {
  const { stores } = await setUp(t, 'once');
  const base = { cron: '0 9 * * *', tz: 'UTC', message: 'x', missed: 'once' as const, nextRunAt: T0 + DAY };
  await assert.rejects(stores[0]!.createSchedule({ ...base, sessionId: 'new' }, T0), {
    code: 'AGENT_REQUIRED',
  });
  await assert.rejects(stores[0]!.createSchedule({ ...base, sessionId: 'new', agent: 'ghost' }, T0), {
    code: 'AGENT_NOT_FOUND',
  });
  assert.throws(() => firstRunOf('0 9 * *', 'UTC', T0), /has 4 fields/);
  assert.throws(() => firstRunOf('0 9 * * *', 'Mars/Olympus', T0), /Time zone "Mars\/Olympus" is not known/);
});
