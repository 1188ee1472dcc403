/**
 * The one excuse the checker grants a chaos run. Pure.
 *
 * Turn k of the workload asserts the committed result of turns 1..k-1. Once a message of
 * a session ended fail or unknown, its writes may be missing, so the messages after it
 * (the rest of its burst, already sent) may fail those asserts without berth doing
 * anything wrong: their failed asserts are excused, and each excused line says after
 * which message. Invariants: a message is excused only when an earlier message (a lower
 * turn) of its own session ended fail or unknown, never otherwise; what is excused is
 * decided from the client's records alone.
 */
import type { RequestRecord } from './session-driver.js';

/** The excused messages, by id, each with why. */
export function excusedMessages(requests: RequestRecord[]): Map<number, string> {
  const firstNotOk = new Map<string, RequestRecord>();
  for (const r of requests) {
    const first = firstNotOk.get(r.session);
    if (r.outcome !== 'ok' && (!first || r.turn < first.turn)) firstNotOk.set(r.session, r);
  }
  const excused = new Map<number, string>();
  for (const r of requests) {
    const first = firstNotOk.get(r.session);
    if (first && r.turn > first.turn && r.messageId !== null)
      excused.set(
        r.messageId,
        `it came after ${r.session} turn ${first.turn} (message ${first.messageId ?? '-'}) ended ${first.outcome}`,
      );
  }
  return excused;
}
