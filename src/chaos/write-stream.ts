/**
 * A stream of acknowledged writes through the real store, and the count of those the
 * store no longer holds: what a database failover may lose. W writers, each one session
 * enqueueing a message after another (every text unique) until told to stop; then every
 * message is read back (on whichever server is the primary by then).
 *
 * Invariants: every call ends in one record, acknowledged (the id the store returned) or
 * failed (the error's code and message); the check only reads.
 */
import { isBerthError } from '../core/index.js';
import type { Store } from '../store/index.js';

export interface Write {
  session: string;
  text: string;
  startedAt: number;
  endedAt: number;
  /** The message id the store acknowledged; null when the call failed. */
  id: number | null;
  error: string | null;
}

export interface WriteCheck {
  /** Acknowledged, but not stored (or stored under another id). */
  lost: Write[];
  /** Stored more than once. */
  duplicated: Write[];
  /** The call failed (stored once at most: a failed call may have been applied). */
  failed: Write[];
}

/** `writers` sessions `<prefix>-<w>` of agent `agent`, each enqueueing one message after another until `stop` settles. */
export async function streamWrites(
  store: Store,
  options: { writers: number; agent: string; prefix: string; stop: Promise<unknown> },
): Promise<Write[]> {
  let stopped = false;
  void options.stop.finally(() => {
    stopped = true;
  });
  const writes: Write[] = [];
  await Promise.all(
    Array.from({ length: options.writers }, async (_, w) => {
      const session = `${options.prefix}-${w}`;
      for (let n = 0; !stopped; n++) {
        const text = `${session}-${n}`;
        const startedAt = Date.now();
        const record = { session, text, startedAt };
        try {
          const { message } = await store.enqueueMessage({
            sessionId: session,
            agent: options.agent,
            text,
            now: store.clock.now(),
          });
          writes.push({ ...record, endedAt: Date.now(), id: message.id, error: null });
        } catch (err) {
          const error = isBerthError(err) ? `${err.code}: ${err.message}` : String(err);
          writes.push({ ...record, endedAt: Date.now(), id: null, error });
        }
      }
    }),
  );
  return writes;
}

/** Reads every written session back and compares it with what was acknowledged. */
export async function checkWrites(store: Store, writes: Write[]): Promise<WriteCheck> {
  const check: WriteCheck = { lost: [], duplicated: [], failed: writes.filter((w) => w.id === null) };
  for (const session of new Set(writes.map((w) => w.session))) {
    const stored = new Map<string, number[]>();
    for (let after = 0; ; ) {
      const page = await store.listMessages(session, after, 500);
      for (const m of page) stored.set(m.text, [...(stored.get(m.text) ?? []), m.id]);
      if (page.length < 500) break;
      after = page.at(-1)!.id;
    }
    for (const write of writes.filter((w) => w.session === session)) {
      const ids = stored.get(write.text) ?? [];
      if (ids.length > 1) check.duplicated.push(write);
      else if (write.id !== null && ids[0] !== write.id) check.lost.push(write);
    }
  }
  return check;
}
