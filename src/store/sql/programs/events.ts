/** Session events: written inside the transition that causes them, with their webhook deliveries; read for SSE. */
import type { LoggedEvent, SessionEvent, SessionEventType } from '../../../core/index.js';
import { all, get, type Program, run, type Tx } from '../program.js';
import { toEvent } from '../rows.js';
import { queueChannelSend } from './channel-outbox.js';

/** The event's id; it reaches listeners once the transaction committed. */
export function* insertEvent(
  tx: Tx,
  sessionId: string,
  type: SessionEventType,
  data: Record<string, unknown>,
  now: number,
): Program<number> {
  const row = (yield* get('INSERT_EVENT', { sessionId, type, data: JSON.stringify(data), now }))!;
  const id = Number(row.id);
  yield* run('INSERT_DELIVERIES_FOR_EVENT', { eventId: id, sessionId, type, now });
  yield* queueChannelSend(tx, id, sessionId, type, data, now);
  tx.changes.push({ type: 'event', event: { id, sessionId, type, data, createdAt: now } });
  return id;
}

/** One session's events (or, null, every session's of `tenant`) after `afterId`, oldest first. */
export function* eventsAfter(
  sessionId: string | null,
  afterId: number,
  limit: number,
  tenant: string | undefined,
): Program<SessionEvent[]> {
  const rows =
    sessionId === null
      ? yield* all('EVENTS_AFTER', { afterId, limit, tenant: tenant ?? null })
      : yield* all('EVENTS_AFTER_OF_SESSION', { sessionId, afterId, limit });
  return rows.map(toEvent);
}

/** Every session's events with ids in (afterId, upToId], oldest first, each with its session's tenant. */
export function* eventLog(afterId: number, upToId: number, limit: number): Program<LoggedEvent[]> {
  const rows = yield* all('EVENT_LOG', { afterId, upToId, limit });
  return rows.map((r) => ({ ...toEvent(r), tenant: r.tenant == null ? null : String(r.tenant) }));
}

/** The newest event id, 0 when there is none. */
export function* lastEventId(): Program<number> {
  const row = yield* get('LAST_EVENT_ID', {});
  return Number(row?.id ?? 0);
}
