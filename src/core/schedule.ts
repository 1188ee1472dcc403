/**
 * Scheduled and recurring messages: a schedule sends `message` to a session at
 * every time its cron expression matches in its time zone. Due schedules are run by any
 * host process (`runDueSchedules`, in one store transaction that moves `next_run_at` on
 * and enqueues the message together, so a due run is enqueued once however many
 * processes look). A run found more than MISSED_AFTER_MS late — the host was down, say —
 * is missed: policy `once` sends it once now, `skip` drops it; either way the runs missed
 * in between are not sent and the schedule moves to its next time after now.
 */
import { z } from 'zod';
import { NAME_PATTERN } from './agent.js';
import { checkTimeZone, nextCronTime, parseCron } from './cron.js';
import { BerthError } from './errors.js';

export const MISSED_POLICIES = ['once', 'skip'] as const;
export type MissedPolicy = (typeof MISSED_POLICIES)[number];
export type ScheduleStatus = 'active' | 'paused' | 'cancelled';
/** A run this late is a missed run, not a late one. */
export const MISSED_AFTER_MS = 60_000;

export const scheduleInputSchema = z
  .object({
    cron: z.string().min(1).max(200),
    /** IANA zone. @default UTC */
    tz: z.string().min(1).max(64).default('UTC'),
    message: z
      .string()
      .min(1)
      .max(256 * 1024),
    /** @default once */
    missed: z.enum(MISSED_POLICIES).default('once'),
    /** Required when the session does not exist yet. */
    agent: z.string().regex(NAME_PATTERN).optional(),
  })
  .strict();
export type ScheduleInput = z.output<typeof scheduleInputSchema>;

/** What an agent asks for with its schedule_message tool: always for its own session. */
export const agentScheduleInputSchema = scheduleInputSchema.omit({ agent: true });
/** How many live schedules an agent's turns may have made, over all its sessions, unless it sets maxSchedules. */
export const AGENT_SCHEDULES_DEFAULT_CAP = 5;

/** A schedule a turn made: held by the gateway, written by that turn's commit (and only if it commits). */
export interface TurnSchedule {
  cron: string;
  tz: string;
  message: string;
  missed: MissedPolicy;
  nextRunAt: number;
}
export type ScheduleBody = z.input<typeof scheduleInputSchema>;

export interface Schedule {
  id: string;
  sessionId: string;
  agent: string | null;
  /** The session's tenant. */
  tenant: string;
  cron: string;
  tz: string;
  message: string;
  missed: MissedPolicy;
  status: ScheduleStatus;
  /** Next due time; null when cancelled or when the cron never matches again. */
  nextRunAt: number | null;
  lastRunAt: number | null;
  runs: number;
  /** The turn whose commit made it (the agent's schedule_message tool); null = made through the API. */
  createdByTurn: string | null;
  createdAt: number;
  updatedAt: number;
}

/** The first due time after `afterMs`; validates the cron and the zone (INVALID_INPUT). */
export function nextRunOf(cron: string, tz: string, afterMs: number): number | null {
  checkTimeZone(tz);
  return nextCronTime(parseCron(cron), tz, afterMs);
}

/** For a new or resumed schedule: its first due time, which must exist. */
export function firstRunOf(cron: string, tz: string, now: number): number {
  const at = nextRunOf(cron, tz, now);
  if (at === null) throw new BerthError('INVALID_INPUT', `Cron "${cron}" never matches in ${tz}`);
  return at;
}

export type ScheduleDecision =
  | { action: 'wait' }
  | { action: 'fire' | 'skip'; dueAt: number; nextRunAt: number | null };

export function decideScheduleRun(
  s: Pick<Schedule, 'cron' | 'tz' | 'missed' | 'nextRunAt' | 'status'>,
  now: number,
): ScheduleDecision {
  if (s.status !== 'active' || s.nextRunAt === null || s.nextRunAt > now) return { action: 'wait' };
  const nextRunAt = nextRunOf(s.cron, s.tz, now);
  const missed = now - s.nextRunAt > MISSED_AFTER_MS;
  return { action: missed && s.missed === 'skip' ? 'skip' : 'fire', dueAt: s.nextRunAt, nextRunAt };
}
