/**
 * The agent's schedule_message tool on the gateway: POST /v1/schedules
 * asks for a recurring message to its own session. Like state, a schedule a turn makes is
 * held here and written by that turn's commit, so a killed or retried turn leaves none
 * behind and a retry does not make a second one. The agent's cap (maxSchedules, over all
 * its sessions) is checked at the request, counting the turn's own, and again in the commit.
 */
import {
  AGENT_SCHEDULES_DEFAULT_CAP,
  type Agent,
  agentScheduleInputSchema,
  BerthError,
  firstRunOf,
  type TurnSchedule,
} from '../core/index.js';
import type { GatewayStore } from '../store/index.js';

export interface SchedulePolicy {
  agent: string;
  cap: number;
}

export function schedulePolicyOf(agent: Pick<Agent, 'name' | 'maxSchedules'>): SchedulePolicy {
  return { agent: agent.name, cap: agent.maxSchedules ?? AGENT_SCHEDULES_DEFAULT_CAP };
}

export const turnScheduleBody = agentScheduleInputSchema;

/** Validates one request and checks the cap; the caller holds the result for the turn's commit. */
export async function planTurnSchedule(
  body: (typeof turnScheduleBody)['_output'],
  held: readonly TurnSchedule[],
  policy: SchedulePolicy,
  store: Pick<GatewayStore, 'countAgentMadeSchedules'>,
  now: number,
): Promise<TurnSchedule> {
  const nextRunAt = firstRunOf(body.cron, body.tz, now);
  const made = await store.countAgentMadeSchedules(policy.agent);
  if (made + held.length + 1 > policy.cap)
    throw new BerthError(
      'SCHEDULE_LIMIT',
      `Agent ${policy.agent} may have at most ${policy.cap} live schedules made by its turns (it has ${made}, this turn holds ${held.length} more)`,
    );
  return { cron: body.cron, tz: body.tz, message: body.message, missed: body.missed, nextRunAt };
}
