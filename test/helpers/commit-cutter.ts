/**
 * A TCP relay between a store and its PostgreSQL server that, once armed, cuts the
 * connection carrying the next COMMIT: either before the COMMIT reaches the server (the
 * transaction is rolled back) or after the server answered it (the transaction committed,
 * the client never hears so). It reads the wire protocol: after the untyped startup
 * message, every message is a type byte and a 4-byte length that counts itself. No TLS.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';

export type CutPoint = 'before-commit' | 'after-commit-answer';

export interface CommitCutter {
  /** The store URL that goes through the relay. */
  url: string;
  /** Cuts the next connection that sends a COMMIT; resolves with the server's transaction status ('I' = committed) or null (cut before). */
  armOnce(point: CutPoint): Promise<string | null>;
  close(): Promise<void>;
}

/** Splits a byte stream into whole protocol messages. */
class MessageReader {
  private pending = Buffer.alloc(0);

  constructor(private untypedFirst: boolean) {}

  push(chunk: Buffer): { type: string; raw: Buffer }[] {
    this.pending = Buffer.concat([this.pending, chunk]);
    const messages: { type: string; raw: Buffer }[] = [];
    for (;;) {
      const header = this.untypedFirst ? 0 : 1;
      if (this.pending.length < header + 4) return messages;
      const size = header + this.pending.readUInt32BE(header);
      if (this.pending.length < size) return messages;
      messages.push({
        type: header ? String.fromCharCode(this.pending.readUInt8(0)) : '',
        raw: this.pending.subarray(0, size),
      });
      this.pending = this.pending.subarray(size);
      this.untypedFirst = false;
    }
  }
}

export async function startCommitCutter(storeUrl: string): Promise<CommitCutter> {
  const target = new URL(storeUrl);
  const sockets = new Set<Socket>();
  let armed: { point: CutPoint; done: (status: string | null) => void } | null = null;

  const server: Server = createServer((down) => {
    const up = connect({ host: target.hostname, port: Number(target.port) });
    for (const s of [down, up]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => undefined);
      s.setNoDelay(true); // the relay writes message by message: no Nagle delay on each
    }
    const cut = () => {
      down.destroy();
      up.destroy();
    };
    down.once('close', cut);
    up.once('close', cut);
    let answerAwaited: ((status: string | null) => void) | null = null;

    const fromClient = new MessageReader(true);
    down.on('data', (chunk: Buffer) => {
      for (const m of fromClient.push(chunk)) {
        const commit = armed && m.type === 'Q' && /\bCOMMIT\b/i.test(m.raw.subarray(5).toString());
        if (commit && armed) {
          const { point, done } = armed;
          armed = null;
          if (point === 'before-commit') {
            cut();
            done(null);
            return;
          }
          answerAwaited = done;
        }
        up.write(m.raw);
      }
    });

    const fromServer = new MessageReader(false);
    up.on('data', (chunk: Buffer) => {
      for (const m of fromServer.push(chunk)) {
        if (answerAwaited) {
          // Hold back the whole answer; cut once the server is ready again (the COMMIT is done).
          if (m.type === 'Z') {
            cut();
            answerAwaited(String.fromCharCode(m.raw.readUInt8(5)));
            return;
          }
          continue;
        }
        down.write(m.raw);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const relayed = new URL(storeUrl);
  relayed.hostname = '127.0.0.1';
  relayed.port = String((server.address() as { port: number }).port);
  return {
    url: relayed.toString(),
    armOnce(point) {
      return new Promise((done) => {
        armed = { point, done };
      });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
