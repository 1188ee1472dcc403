/**
 * Slack's Socket Mode: events over a WebSocket berth opens (no public URL). The URL is
 * asked from `apps.connections.open` with the app-level token; Slack greets with `hello`,
 * sends each event as an `events_api` envelope, and redelivers an envelope not
 * acknowledged (`{envelope_id}` sent back) — on this connection or the next.
 *
 * Exactly once: an envelope is acknowledged only after its event is committed (the
 * runner's commit is store.commitChannelEvent, keyed by `event_id`), so a crash before the
 * commit leaves it unacknowledged and redelivered, and a crash after it (before the ack)
 * redelivers an event whose id is found: committed once, then acknowledged. Frames are
 * handled one after another. `disconnect` (refresh_requested, warning) opens a new
 * connection; `link_disabled` is a refusal. A frame that is not JSON with a string `type`,
 * or an `events_api` without an envelope_id, ends the connection (the runner reconnects).
 */
import { failpoint } from '../core/index.js';
import { asPlatformError, jsonObjectOf, PlatformError } from './channel.js';

/** A Socket Mode frame as berth acts on it. */
export type SocketFrame =
  | { type: 'hello' }
  | { type: 'disconnect'; reason: string }
  /** An envelope to acknowledge; `payload` is an Events API body when `events` (else nothing berth takes). */
  | { type: 'envelope'; envelopeId: string; events: boolean; payload: unknown };

/** A frame read off the socket, or null when it is not one berth can act on. */
export function parseSocketFrame(raw: unknown): SocketFrame | null {
  const f = jsonObjectOf(raw);
  if (f === null || typeof f.type !== 'string') return null;
  if (f.type === 'hello') return { type: 'hello' };
  if (f.type === 'disconnect')
    return { type: 'disconnect', reason: typeof f.reason === 'string' ? f.reason : '' };
  if (typeof f.envelope_id !== 'string' || f.envelope_id === '') return null;
  return {
    type: 'envelope',
    envelopeId: f.envelope_id,
    events: f.type === 'events_api',
    payload: f.payload ?? null,
  };
}

/**
 * One Socket Mode connection, from `hello` to its end: resolves when Slack asks for a new
 * one (disconnect) or `signal` aborts; rejects with a PlatformError when it failed. Each
 * Events API payload is handed to `onEvent`, and its envelope acknowledged once that resolves.
 */
export function socketModeConnection(
  url: string,
  onEvent: (payload: unknown) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const ws = new WebSocket(url);
    let settled = false;
    let queue = Promise.resolve();
    const finish = (failure: PlatformError | null) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close(1000);
      if (failure) reject(failure);
      else resolve();
    };
    const transient = (description: string) =>
      finish(new PlatformError({ kind: 'transient', description: `Slack Socket Mode: ${description}` }));
    const onAbort = () => finish(null);
    signal.addEventListener('abort', onAbort, { once: true });
    const handle = async (frame: SocketFrame) => {
      switch (frame.type) {
        case 'hello':
          return;
        case 'disconnect':
          if (frame.reason === 'link_disabled')
            return finish(
              new PlatformError({
                kind: 'refused',
                status: 410,
                description: 'Slack Socket Mode: link_disabled (Socket Mode is off for the app)',
              }),
            );
          return finish(null);
        case 'envelope':
          if (frame.events) await onEvent(frame.payload);
          failpoint('channel-before-ack');
          if (!settled) ws.send(JSON.stringify({ envelope_id: frame.envelopeId }));
          return;
      }
    };
    ws.addEventListener('message', (event) => {
      const frame = parseSocketFrame(event.data);
      if (frame === null) return transient('malformed frame; reconnecting');
      queue = queue
        .then(() => (settled ? undefined : handle(frame)))
        .catch((err: unknown) => finish(asPlatformError(err, 'Slack Socket Mode')));
    });
    // Envelopes already read are committed first: those not acknowledged come again on the next connection.
    ws.addEventListener('close', (event) => {
      void queue.then(() => transient(`closed (${event.code})`));
    });
    ws.addEventListener('error', () => {
      if (ws.readyState !== WebSocket.OPEN) transient('connection failed');
    });
  });
}
