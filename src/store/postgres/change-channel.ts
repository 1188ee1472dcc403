/**
 * Store notifications between processes sharing one PostgreSQL database (workers on
 * several machines, the API): a writer NOTIFYs hints inside its transaction, so they go
 * out only if it commits; every process LISTENs on one channel on a connection of its
 * own, reconnecting with backoff when it drops. Best effort by design, as the SQLite
 * relay: a hint lost while the listener reconnects only costs the polling floor the
 * loops keep anyway; correctness never depends on it.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { changeHints } from '../change-hints.js';
import type { StoreChange } from '../store.js';

export const CHANNEL = 'berth_changes';
/** PostgreSQL refuses payloads of 8000 bytes or more. */
const MAX_PAYLOAD_BYTES = 7900;
const RECONNECT_MIN_MS = 100;
const RECONNECT_MAX_MS = 5000;

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

export class ChangeListener {
  /** The connection being opened or open; events of any other are stale. */
  private current: pg.Client | null = null;
  private closed = false;
  private retryMs = RECONNECT_MIN_MS;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly config: pg.ClientConfig,
    /** Own notifications are skipped. */
    private readonly tag: string,
    private readonly deliver: (change: StoreChange) => void,
    private readonly onLost: (err: unknown) => void,
  ) {}

  start(): void {
    void this.connect();
  }

  async stop(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    const client = this.current;
    this.current = null;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const client = new pg.Client(this.config);
    this.current = client;
    client.on('notification', (n) => this.receive(n.payload));
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('listener connection ended')));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
      this.retryMs = RECONNECT_MIN_MS;
    } catch (err) {
      this.lost(client, err);
    }
  }

  /** Reconnects with backoff; the first sign of a loss (error or end) counts, later ones of the same connection do not. */
  private lost(client: pg.Client, err: unknown): void {
    if (this.closed || client !== this.current) return;
    this.current = null;
    client.end().catch(() => undefined);
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
