/**
 * Schedules: made by the API (a turn's own are written by its commit, turns.ts), paused,
 * resumed, cancelled, and their due runs handled once each by compare-and-set on the due
 * time, in the transaction that enqueues the run.
 */
import {
  BerthError,
  BY_CREATION,
  newId,
  nextRunOf,
  type PageRequest,
  type Schedule,
  type ScheduleDecision,
  type ScheduleStatus,
} from '../../../core/index.js';
import type { NewSchedule } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, run, type Tx } from '../program.js';
import { toSchedule } from '../rows.js';
import { ownedBy } from './agents.js';
import { checkEnqueue, enqueueMessage, sessionTenantFor } from './sessions.js';

export function* createSchedule(tx: Tx, input: NewSchedule, now: number): Program<Schedule> {
  const tenant = yield* sessionTenantFor(input, tx.operation);
  const id = newId('sch');
  yield* run('INSERT_SCHEDULE', {
    ...input,
    agent: input.agent ?? null,
    tenant,
    id,
    createdByTurn: null,
    now,
  });
  return toSchedule((yield* get('SCHEDULE_BY_ID', { id }))!);
}

export function* listSchedules(
  sessionId: string | null,
  tenant: string | undefined,
  page?: PageRequest,
): Program<Schedule[]> {
  const params = { sessionId, tenant: tenant ?? null, ...pageParams(BY_CREATION, page) };
  return (yield* all('SCHEDULES', params)).map(toSchedule);
}

export function* countAgentMadeSchedules(agent: string): Program<number> {
  return Number((yield* get('AGENT_MADE_SCHEDULES', { agent }))!.n);
}

export function* moveScheduleTo(
  id: string,
  status: ScheduleStatus,
  now: number,
  tenant: string | undefined,
): Program<Schedule> {
  const row = yield* get('SCHEDULE_BY_ID', { id });
  if (!row || !ownedBy(row, tenant))
    throw new BerthError('SCHEDULE_NOT_FOUND', `Schedule ${id} does not exist (moveScheduleTo ${status})`);
  const s = toSchedule(row);
  if (s.status === 'cancelled') throw scheduleCancelled(id, status);
  // Resumed: next due after now, so runs that fell while paused are not sent.
  const nextRunAt =
    status === 'active' ? nextRunOf(s.cron, s.tz, now) : status === 'paused' ? s.nextRunAt : null;
  if ((yield* run('MOVE_SCHEDULE', { id, status, nextRunAt, now })) !== 1)
    throw scheduleCancelled(id, status);
  return toSchedule((yield* get('SCHEDULE_BY_ID', { id }))!);
}

export function* dueSchedules(now: number): Program<Schedule[]> {
  return (yield* all('DUE_SCHEDULES', { now })).map(toSchedule);
}

/** What became of one due run: sent, skipped by its missed-run policy, refused (audited), or handled by another process. */
export type DueRunOutcome = 'fired' | 'skipped' | 'failed' | 'taken';

/** One due run, decided by decideScheduleRun (fire or skip), handled unless another process moved the due time first. */
export function* runDueSchedule(
  tx: Tx,
  s: Schedule,
  decision: Exclude<ScheduleDecision, { action: 'wait' }>,
  now: number,
  leaseMs: number,
): Program<DueRunOutcome> {
  // Compare-and-set on the due time: whoever moves it on first handles the run, once.
  const moved = yield* run('ADVANCE_SCHEDULE', {
    id: s.id,
    dueAt: decision.dueAt,
    nextRunAt: decision.nextRunAt,
    fired: decision.action === 'fire' ? 1 : 0,
    now,
  });
  if (moved !== 1) return 'taken';
  if (decision.action === 'skip') return 'skipped';
  const input = {
    sessionId: s.sessionId,
    text: s.message,
    now,
    tenant: s.tenant,
    ...(s.agent ? { agent: s.agent } : {}),
  };
  const failure = yield* checkEnqueue(input, tx.operation);
  if (failure) {
    // The session was archived or its agent deleted: the schedule moves on and says why.
    yield* run('INSERT_AUDIT', {
      now,
      kind: 'schedule-failed',
      sessionId: s.sessionId,
      generation: null,
      data: JSON.stringify({ scheduleId: s.id, error: failure.message }),
    });
    return 'failed';
  }
  yield* enqueueMessage(tx, input, leaseMs);
  return 'fired';
}

function scheduleCancelled(id: string, status: ScheduleStatus): BerthError {
  return new BerthError('SCHEDULE_CANCELLED', `Schedule ${id} is cancelled (moveScheduleTo ${status})`);
}
