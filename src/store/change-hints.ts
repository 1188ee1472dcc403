/**
 * What another process needs of this process's store notifications to wake up: small
 * hints, never payloads (an event becomes "session X has new events: read them"), each
 * once. Both stores send these across processes; losing one only costs the polling floor.
 */
import type { StoreChange } from './store.js';

export function changeHints(changes: StoreChange[]): StoreChange[] {
  const seen = new Set<string>();
  const hints: StoreChange[] = [];
  for (const change of changes) {
    const hint: StoreChange =
      change.type === 'event' ? { type: 'events', sessionId: change.event.sessionId } : change;
    const key = JSON.stringify(hint);
    if (seen.has(key)) continue;
    seen.add(key);
    hints.push(hint);
  }
  return hints;
}
