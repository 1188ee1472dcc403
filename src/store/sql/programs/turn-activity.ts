/**
 * What a turn's timeline is made of (core's buildTurnTimeline): the session's events over
 * its tries' span and the model calls of each try. A read: nothing here writes.
 */
import type { ModelCallRecord, Turn, TurnActivity } from '../../../core/index.js';
import { all, type Program } from '../program.js';
import { toEvent } from '../rows.js';

/** Events read for one timeline at most: a turn past it shows its first ones (a tool loop's progress is a few per call). */
export const TIMELINE_EVENTS_LIMIT = 10_000;

export function* turnActivity(sessionId: string, attempts: Turn[]): Program<TurnActivity> {
  if (attempts.length === 0) return { events: [], modelCalls: [], truncated: false };
  const since = Math.min(...attempts.map((t) => t.startedAt));
  const until = attempts.some((t) => t.endedAt === null)
    ? null
    : Math.max(...attempts.map((t) => t.endedAt ?? 0));
  const ids = new Set(attempts.map((t) => t.id));
  const rows = yield* all('EVENTS_OF_SESSION_BETWEEN', {
    sessionId,
    since,
    until,
    limit: TIMELINE_EVENTS_LIMIT,
  });
  const events = rows.map(toEvent).filter((e) => ids.has(String(e.data.turnId)));
  const modelCalls: ModelCallRecord[] = [];
  for (const t of attempts)
    for (const r of yield* all('MODEL_CALLS_OF_TURN', { turnId: t.id }))
      modelCalls.push({
        turnId: String(r.turn_id),
        at: Number(r.at),
        provider: String(r.provider),
        model: String(r.model),
        inputTokens: Number(r.input_tokens),
        outputTokens: Number(r.output_tokens),
      });
  return { events, modelCalls, truncated: rows.length === TIMELINE_EVENTS_LIMIT };
}
