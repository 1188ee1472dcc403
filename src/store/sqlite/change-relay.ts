/**
 * Carries store notifications between processes that share one SQLite file (`berth up`,
 * `berth worker`s): each process listens on a loopback UDP port recorded in the
 * `change_listeners` table, and after every committed transaction sends a small datagram
 * to the others. Best effort by design: a lost datagram only costs the polling floor the
 * loops keep anyway (lease/5 for workers, 1 s for SSE); correctness never depends on it.
 */
import { createSocket, type Socket } from 'node:dgram';
import type Database from 'better-sqlite3';
import { changeHints } from '../change-hints.js';
import type { StoreChange } from '../store.js';

/** Peers are re-read at most this often. */
const PEERS_TTL_MS = 500;

export class ChangeRelay {
  private socket: Socket | null = null;
  private port = 0;
  private peers: number[] = [];
  private peersReadAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  constructor(
    private readonly db: Database.Database,
    private readonly deliver: (change: StoreChange) => void,
  ) {}

  /** Binds a loopback port and, once bound, records it for the other processes. */
  start(): void {
    const socket = createSocket('udp4');
    socket.on('message', (buf) => {
      try {
        for (const change of JSON.parse(buf.toString('utf8')) as StoreChange[]) this.deliver(change);
      } catch {
        // Not ours, or cut: the polling floor covers it.
      }
    });
    socket.on('error', () => undefined);
    socket.bind(0, '127.0.0.1', () => {
      if (this.closed) return void socket.close();
      this.socket = socket;
      this.port = socket.address().port;
      this.db
        .prepare('INSERT OR REPLACE INTO change_listeners (port, pid, started_at) VALUES (?, ?, ?)')
        .run(this.port, process.pid, Date.now());
    });
    socket.unref();
  }

  /** Sends what another process needs to wake up: small hints, never payloads. */
  publish(changes: StoreChange[]): void {
    if (!this.socket || changes.length === 0) return;
    const datagram = Buffer.from(JSON.stringify(changeHints(changes)));
    for (const port of this.livePeers()) this.socket.send(datagram, port, '127.0.0.1');
  }

  stop(): void {
    this.closed = true;
    if (!this.socket) return;
    this.db.prepare('DELETE FROM change_listeners WHERE port = ? AND pid = ?').run(this.port, process.pid);
    this.socket.close();
    this.socket = null;
  }

  private livePeers(): number[] {
    const now = performance.now(); // a cache age: elapsed time, on the monotonic timer
    if (now - this.peersReadAt < PEERS_TTL_MS) return this.peers;
    const rows = this.db.prepare('SELECT port, pid FROM change_listeners WHERE port != ?').all(this.port) as {
      port: number;
      pid: number;
    }[];
    const dead = rows.filter((r) => !processAlive(r.pid));
    for (const r of dead)
      this.db.prepare('DELETE FROM change_listeners WHERE port = ? AND pid = ?').run(r.port, r.pid);
    this.peers = rows.filter((r) => !dead.includes(r)).map((r) => r.port);
    this.peersReadAt = now;
    return this.peers;
  }
}

/** Peers share this machine (they share a SQLite file), so a signal-0 probe tells if one is gone. */
function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
