/** Following an SSE route the way a client that keeps reconnecting does (the change feed's tests). */
import assert from 'node:assert/strict';
import type { StreamedEvent } from '../../src/client/index.js';
import type { SessionEvent } from '../../src/core/index.js';

/**
 * Follows a stream, reconnecting after every `every` events from the last id it got, until
 * `until` says it has all. With `resumeAfterBreak`, a connection that breaks (its server
 * died) is opened again from the last id too, and counted in `broken`; without it, it fails.
 */
export async function followWithReconnects(
  open: (after: number, signal: AbortSignal) => AsyncGenerator<StreamedEvent>,
  every: number,
  until: (got: StreamedEvent[]) => boolean,
  options: { resumeAfterBreak?: boolean; timeoutMs?: number } = {},
): Promise<{ got: StreamedEvent[]; reconnects: number; broken: number }> {
  const got: StreamedEvent[] = [];
  let reconnects = 0;
  let broken = 0;
  const deadline = AbortSignal.timeout(options.timeoutMs ?? 60_000);
  while (!until(got)) {
    let inThisConnection = 0;
    const after = got.at(-1)?.id ?? 0;
    try {
      for await (const e of open(after, deadline)) {
        if (e.id === null) continue;
        got.push(e);
        if (until(got)) break;
        if (++inThisConnection === every) break;
      }
    } catch (err) {
      if (!options.resumeAfterBreak || deadline.aborted) throw err;
      broken++;
      await new Promise((r) => setTimeout(r, 100));
    }
    reconnects++;
  }
  return { got, reconnects, broken };
}

/** What a tenant stream and one session's stream got, against the stored events: each once, in order. */
export function assertEveryEventOnce(
  stored: SessionEvent[],
  tenant: StreamedEvent[],
  session: { id: string; got: StreamedEvent[] },
): void {
  assert.deepEqual(
    tenant.map((e) => e.id),
    stored.map((e) => e.id),
    'the tenant stream: every event once, in id order',
  );
  assert.deepEqual(
    session.got.map((e) => e.id),
    stored.filter((e) => e.sessionId === session.id).map((e) => e.id),
    'the session stream: every event of its session once, in order',
  );
}
