/** Following an SSE route the way a client that keeps reconnecting does (the change feed's tests). */
import type { StreamedEvent } from '../../src/client/index.js';

/** Follows a stream, reconnecting after every `every` events from the last id it got, until `until` says it has all. */
export async function followWithReconnects(
  open: (after: number, signal: AbortSignal) => AsyncGenerator<StreamedEvent>,
  every: number,
  until: (got: StreamedEvent[]) => boolean,
): Promise<{ got: StreamedEvent[]; reconnects: number }> {
  const got: StreamedEvent[] = [];
  let reconnects = 0;
  const deadline = AbortSignal.timeout(60_000);
  while (!until(got)) {
    let inThisConnection = 0;
    const after = got.at(-1)?.id ?? 0;
    for await (const e of open(after, deadline)) {
      if (e.id === null) continue;
      got.push(e);
      if (until(got)) break;
      if (++inThisConnection === every) break;
    }
    reconnects++;
  }
  return { got, reconnects };
}
