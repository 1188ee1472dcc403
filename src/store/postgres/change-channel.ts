/**
 * Store notifications between processes sharing one PostgreSQL database (workers on
 * several machines, the API): a writer NOTIFYs hints once its transaction committed (in a
 * statement of their own: postgres-store.ts says why), so they go out only if it commits;
 * every process LISTENs on one channel on a connection of its own, to the primary,
 * reconnecting with backoff when it drops. Best effort by design, as
 * the SQLite relay: a hint lost while the listener reconnects only costs the polling floor
 * the loops keep anyway; correctness never depends on it.
 *
 * A listening connection only receives, so it would not notice its server vanish (a cut
 * link sends nothing): it pings every PING_MS, watched like every statement
 * (server-watch.ts), and it moves at once when the store's calls find the primary on
 * another host (`follow`): NOTIFYs are sent on the primary only.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { changeHints } from '../change-hints.js';
import type { StoreChange } from '../store.js';
import type { OwnConnection } from './primary-pool.js';

export const CHANNEL = 'berth_changes';
/** PostgreSQL refuses payloads of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7900;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;
const PING_MS = 5000;

interface Payload {
  /** The sending store: it already delivered its own changes in full. */
  from: string;
  hints: StoreChange[];
}

/** A tag for one open store's notifications. */
export function newStoreTag(): string {
  return randomBytes(6).toString('hex');
}

/** The NOTIFY payloads for a transaction's changes, each under PostgreSQL's size limit. */
export function notifyPayloads(from: string, changes: StoreChange[]): string[] {
  const payloads: string[] = [];
  let batch: StoreChange[] = [];
  const encode = (hints: StoreChange[]) => JSON.stringify({ from, hints } satisfies Payload);
  for (const hint of changeHints(changes)) {
    if (batch.length > 0 && Buffer.byteLength(encode([...batch, hint])) > MAX_PAYLOAD_BYTES) {
      payloads.push(encode(batch));
      batch = [];
    }
    batch.push(hint);
  }
  if (batch.length > 0) payloads.push(encode(batch));
  return payloads;
}

/** One connection attempt of the listener: its client, host and ping once connected. */
interface Listening {
  client: pg.Client | null;
  url: string | null;
  ping: OwnConnection['query'] | null;
}

export class ChangeListener {
  /** The connection being opened or open; events of any other are stale. */
  private current: Listening | null = null;
  private closed = false;
  private retryMs = RECONNECT_MIN_MS;
  private timer: NodeJS.Timeout | undefined;
  private readonly pinger: NodeJS.Timeout;

  constructor(
    /** A connection of its own to the primary. */
    private readonly open: () => Promise<OwnConnection>,
    /** Own notifications are skipped. */
    private readonly tag: string,
    private readonly deliver: (change: StoreChange) => void,
    private readonly onLost: (err: unknown) => void,
  ) {
    this.pinger = setInterval(() => this.ping(), PING_MS);
    this.pinger.unref();
  }

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.pinger);
    const client = this.current?.client;
    this.current = null;
    await client?.end().catch(() => undefined);
  }

  /** The primary is now at `url`: a connection elsewhere is dropped for one there. */
  follow(url: string): void {
    const current = this.current;
    if (current?.client && current.url !== url)
      this.lost(current, new Error('the primary moved to another host'));
  }

  private async connect(): Promise<void> {
    const attempt: Listening = { client: null, url: null, ping: null };
    this.current = attempt;
    try {
      const own = await this.open();
      if (this.current !== attempt) {
        await own.client.end().catch(() => undefined);
        return;
      }
      Object.assign(attempt, { client: own.client, url: own.url, ping: own.query });
      own.client.on('notification', (n) => this.receive(n.payload));
      own.client.on('error', (err) => this.lost(attempt, err));
      own.client.on('end', () => this.lost(attempt, new Error('listener connection ended')));
      await own.query(`LISTEN ${CHANNEL}`);
      this.retryMs = RECONNECT_MIN_MS;
    } catch (err) {
      this.lost(attempt, err);
    }
  }

  /** A statement on an idle connection: a server that stopped answering gets it dropped (server-watch.ts). */
  private ping(): void {
    this.current?.ping?.('SELECT 1').catch(() => undefined);
  }

  /** Reconnects with backoff; the first sign of a loss (error or end) counts, later ones of the same connection do not. */
  private lost(attempt: Listening, err: unknown): void {
    if (this.closed || attempt !== this.current) return;
    this.current = null;
    attempt.client?.end().catch(() => undefined);
    this.onLost(err);
    this.timer = setTimeout(() => void this.connect(), this.retryMs);
    this.timer.unref();
    this.retryMs = Math.min(this.retryMs * 2, RECONNECT_MAX_MS);
  }

  private receive(payload: string | undefined): void {
    try {
      const parsed = JSON.parse(payload ?? '') as Payload;
      if (parsed.from === this.tag) return;
      for (const hint of parsed.hints) this.deliver(hint);
    } catch {
      // Not ours: the polling floor covers anything lost.
    }
  }
}
