/**
 * A local Discord for tests: the REST routes berth calls (`<url>/...`, `Authorization: Bot
 * <token>`) and a real Gateway (a WebSocket server on the same port) speaking its op codes.
 *
 * - GET /gateway/bot: the Gateway's URL (this server's /gateway).
 * - POST /channels/{id}/messages: recorded and stored; with `enforce_nonce`, a nonce seen
 *   before answers the message it first created (Discord's idempotency) and posts nothing.
 *   JSON, or multipart as a file is sent: `payload_json` and `files[n]` (recorded as the
 *   payload with `files: [{name, bytes}]`, the message's `attachments` served like a user's).
 * - GET /cdn/attachments/{channel}/{id}/{name} (outside /api, as Discord's CDN): a
 *   message's file, whose `url` names it; 400 to a request carrying a token (none is owed).
 *   The new message is dispatched over the Gateway too, as Discord echoes a bot's own.
 * - GET /channels/{id}/messages?after=&limit=: the channel's messages after a snowflake,
 *   newest first (as Discord answers).
 * - POST /channels/{id}/typing: 204.
 * - Any route answers 429 with `retry_after` (JSON, seconds) on demand, or says its
 *   bucket is empty (`X-RateLimit-Remaining: 0`, `X-RateLimit-Reset-After`).
 * Gateway: HELLO on connect; IDENTIFY (token and intents checked) → READY with a new
 * session; RESUME of a known session → the dispatches after its sequence, then RESUMED,
 * else INVALID_SESSION (d: false); a heartbeat (op 1) is acknowledged (op 11). A session's
 * dispatches are kept, so one sent while its connection was dropped is replayed on RESUME.
 * Every REST call and Gateway frame is recorded, so a test can count.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type WebSocket, WebSocketServer } from 'ws';
import { closeLocal, listenLocal } from './local-server.js';

export interface FakeDiscordCall {
  method: string;
  path: string;
  body: Record<string, unknown> | null;
  status: number;
}

export interface GatewayRecord {
  dir: 'in' | 'out';
  op: number;
  t: string | null;
  d: unknown;
}

export interface DiscordMessageRow {
  id: string;
  channel_id: string;
  guild_id?: string;
  type: number;
  content: string;
  author: { id: string; username: string; bot?: boolean };
  mentions: { id: string }[];
  message_reference?: { message_id: string };
  nonce?: string;
  attachments?: { id: string; filename: string; size: number; url: string }[];
}

/** A file on a message: its name and bytes, and the size Discord reports (its length unless set). */
export interface FakeDiscordFile {
  name: string;
  bytes: Buffer;
  reportedSize?: number;
}

interface Session {
  id: string;
  seq: number;
  dispatches: { s: number; t: string; d: unknown }[];
  socket: WebSocket | null;
}

const EPOCH = 1_420_070_400_000n;
export const FAKE_BOT_ID = '900000000000000001';

export class FakeDiscord {
  readonly calls: FakeDiscordCall[] = [];
  readonly frames: GatewayRecord[] = [];
  readonly messages: DiscordMessageRow[] = [];
  private readonly nonces = new Map<string, DiscordMessageRow>();
  /** The CDN: bytes by path. */
  private readonly cdn = new Map<string, Buffer>();
  private readonly sessions = new Map<string, Session>();
  private readonly failures = new Map<string, { count: number; retryAfter: number }>();
  private readonly exhausted = new Map<string, number>();
  private live: Session | null = null;
  private counter = 0n;
  private readonly server = createServer((req, res) => void this.handle(req, res));
  private readonly gateway = new WebSocketServer({ noServer: true });
  url = '';

  constructor(
    readonly token: string,
    readonly heartbeatMs = 5_000,
  ) {
    this.server.on('upgrade', (req, socket, head) =>
      this.gateway.handleUpgrade(req, socket, head, (ws) => this.onConnection(ws)),
    );
  }

  async start(): Promise<this> {
    this.url = await listenLocal(this.server, '/api');
    return this;
  }

  async close(): Promise<void> {
    for (const ws of this.gateway.clients) ws.terminate();
    this.gateway.close();
    closeLocal(this.server);
  }

  /** The next `count` calls of `METHOD /path-prefix` (e.g. `POST /channels`) answer 429. */
  rateLimitNext(route: string, count: number, retryAfterSeconds: number): void {
    this.failures.set(route, { count, retryAfter: retryAfterSeconds });
  }

  /** The next answer of a route (`METHOD /path-prefix`) says its bucket is empty for `resetAfterSeconds`. */
  exhaustBucketNext(route: string, resetAfterSeconds: number): void {
    this.exhausted.set(route, resetAfterSeconds);
  }

  callsOf(method: string, pathPart: string): FakeDiscordCall[] {
    return this.calls.filter((c) => c.method === method && c.path.includes(pathPart));
  }

  framesOf(op: number): GatewayRecord[] {
    return this.frames.filter((f) => f.op === op);
  }

  /** Whether a Gateway connection is open and identified or resumed. */
  get connected(): boolean {
    return this.live?.socket != null;
  }

  /** A user's message in a channel: stored, and dispatched to the session (replayed on RESUME if its connection is down). */
  userMessage(input: {
    channelId: string;
    userId: string;
    content: string;
    guildId?: string;
    mentionsBot?: boolean;
    files?: FakeDiscordFile[];
  }): DiscordMessageRow {
    const id = this.snowflake();
    const row: DiscordMessageRow = {
      id,
      ...this.attached(input.channelId, input.files ?? []),
      channel_id: input.channelId,
      ...(input.guildId ? { guild_id: input.guildId } : {}),
      type: 0,
      content: input.mentionsBot ? `<@${FAKE_BOT_ID}> ${input.content}` : input.content,
      author: { id: input.userId, username: `user${input.userId}` },
      mentions: input.mentionsBot ? [{ id: FAKE_BOT_ID }] : [],
    };
    this.messages.push(row);
    this.dispatch('MESSAGE_CREATE', row);
    return row;
  }

  /** Drops the live connection without a close frame, as a network failure does. */
  dropConnection(): void {
    this.live?.socket?.terminate();
  }

  /** Sends a frame that is not JSON on the live connection. */
  sendMalformed(): void {
    this.live?.socket?.send('{"op": 0, "d": {');
    this.frames.push({ dir: 'out', op: -1, t: 'MALFORMED', d: null });
  }

  /** The bot's messages posted in a channel (not the ones a nonce answered again). */
  botMessages(channelId?: string): DiscordMessageRow[] {
    return this.messages.filter(
      (m) => m.author.bot && (channelId === undefined || m.channel_id === channelId),
    );
  }

  /** The files as a message's `attachments`, each served by the CDN at its `url`. */
  private attached(channelId: string, files: FakeDiscordFile[]): Pick<DiscordMessageRow, 'attachments'> {
    if (files.length === 0) return {};
    return {
      attachments: files.map((f) => {
        const id = this.snowflake();
        const path = `/cdn/attachments/${channelId}/${id}/${encodeURIComponent(f.name)}`;
        this.cdn.set(path, f.bytes);
        const url = `${this.url.replace(/\/api$/, '')}${path}?ex=0&hm=signed`;
        return { id, filename: f.name, size: f.reportedSize ?? f.bytes.length, url };
      }),
    };
  }

  /** A request's body: JSON, or a multipart create's `payload_json` with its `files[n]` read out. */
  private async bodyOf(req: IncomingMessage, raw: Buffer): Promise<Record<string, unknown> | null> {
    const type = req.headers['content-type'] ?? '';
    if (!type.startsWith('multipart/form-data'))
      return raw.length > 0 ? (JSON.parse(raw.toString()) as Record<string, unknown>) : null;
    const form = await new Response(new Uint8Array(raw), { headers: { 'content-type': type } }).formData();
    const files: FakeDiscordFile[] = [];
    for (const [field, value] of form.entries())
      if (/^files\[\d+\]$/.test(field) && value instanceof File)
        files.push({ name: value.name, bytes: Buffer.from(await value.arrayBuffer()) });
    return { ...(JSON.parse(String(form.get('payload_json'))) as Record<string, unknown>), files };
  }

  private snowflake(): string {
    this.counter += 1n;
    return String(((BigInt(Date.now()) - EPOCH) << 22n) + (this.counter % 4096n));
  }

  private dispatch(t: string, d: unknown): void {
    const session = this.live;
    if (!session) return;
    session.seq += 1;
    const frame = { s: session.seq, t, d };
    session.dispatches.push(frame);
    if (session.socket) this.sendFrame(session.socket, { op: 0, ...frame });
  }

  private sendFrame(
    ws: WebSocket,
    frame: { op: number; d: unknown; s?: number | null; t?: string | null },
  ): void {
    this.frames.push({ dir: 'out', op: frame.op, t: frame.t ?? null, d: frame.d });
    ws.send(JSON.stringify({ s: null, t: null, ...frame }));
  }

  private onConnection(ws: WebSocket): void {
    this.sendFrame(ws, { op: 10, d: { heartbeat_interval: this.heartbeatMs } });
    ws.on('close', () => {
      if (this.live?.socket === ws) this.live.socket = null;
    });
    ws.on('message', (raw) => {
      const frame = JSON.parse(String(raw)) as { op: number; d: Record<string, unknown> | number | null };
      this.frames.push({ dir: 'in', op: frame.op, t: null, d: frame.d });
      const d = (frame.d ?? {}) as Record<string, unknown>;
      switch (frame.op) {
        case 1:
          this.sendFrame(ws, { op: 11, d: null });
          return;
        case 2: {
          if (d.token !== this.token) return void ws.close(4004, 'Authentication failed');
          const session: Session = {
            id: `sess${this.sessions.size + 1}`,
            seq: 0,
            dispatches: [],
            socket: ws,
          };
          this.sessions.set(session.id, session);
          this.live = session;
          this.dispatch('READY', {
            v: 10,
            session_id: session.id,
            resume_gateway_url: this.url.replace(/^http/, 'ws').replace(/\/api$/, '/gateway'),
            user: { id: FAKE_BOT_ID, username: 'berthbot', bot: true },
          });
          return;
        }
        case 6: {
          const session = this.sessions.get(String(d.session_id));
          if (d.token !== this.token || !session || session !== this.live) {
            this.sendFrame(ws, { op: 9, d: false });
            return;
          }
          session.socket = ws;
          const after = Number(d.seq ?? 0);
          for (const missed of session.dispatches.filter((x) => x.s > after))
            this.sendFrame(ws, { op: 0, ...missed });
          this.dispatch('RESUMED', {});
          return;
        }
      }
    });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = await this.bodyOf(req, Buffer.concat(chunks));
    const url = new URL(req.url ?? '/', 'http://x');
    const path = url.pathname.replace(/^\/api/, '');
    const method = req.method ?? 'GET';
    if (url.pathname.startsWith('/cdn/')) {
      const file = this.cdn.get(url.pathname);
      // The token has no business at the CDN: a request that carries it is refused, visibly.
      const status = req.headers.authorization !== undefined ? 400 : file ? 200 : 404;
      this.calls.push({ method, path: url.pathname, body: null, status });
      res.writeHead(status, { 'content-type': 'application/octet-stream' });
      return void res.end(status === 200 ? file : '');
    }
    const answer = (status: number, value: unknown) => {
      this.calls.push({ method, path: `${path}${url.search}`, body, status });
      const bucket = [...this.exhausted.entries()].find(([r]) => `${method} ${path}`.startsWith(r));
      if (bucket) {
        this.exhausted.delete(bucket[0]);
        res.setHeader('x-ratelimit-remaining', '0');
        res.setHeader('x-ratelimit-reset-after', String(bucket[1]));
      }
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(value === null ? '' : JSON.stringify(value));
    };
    if (req.headers.authorization !== `Bot ${this.token}`)
      return answer(401, { message: '401: Unauthorized', code: 0 });
    const route = [...this.failures.entries()].find(([r]) => `${method} ${path}`.startsWith(r));
    if (route && route[1].count > 0) {
      route[1].count -= 1;
      return answer(429, {
        message: 'You are being rate limited.',
        retry_after: route[1].retryAfter,
        global: false,
      });
    }
    if (method === 'GET' && path === '/gateway/bot')
      return answer(200, { url: this.url.replace(/^http/, 'ws').replace(/\/api$/, '/gateway'), shards: 1 });
    const match = /^\/channels\/([^/]+)\/(messages|typing)$/.exec(path);
    if (!match) return answer(404, { message: 'Unknown route' });
    const channelId = match[1]!;
    if (match[2] === 'typing') return answer(204, null);
    if (method === 'GET') {
      const after = BigInt(url.searchParams.get('after') ?? '0');
      const limit = Number(url.searchParams.get('limit') ?? 50);
      const page = this.messages
        .filter((m) => m.channel_id === channelId && BigInt(m.id) > after)
        .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
        .slice(0, limit)
        .reverse();
      return answer(200, page);
    }
    const nonce = typeof body?.nonce === 'string' ? body.nonce : undefined;
    const earlier = nonce !== undefined && body?.enforce_nonce === true ? this.nonces.get(nonce) : undefined;
    if (earlier) return answer(200, earlier);
    const reference = body?.message_reference as { message_id?: string } | undefined;
    const row: DiscordMessageRow = {
      id: this.snowflake(),
      channel_id: channelId,
      type: reference ? 19 : 0,
      content: String(body?.content ?? ''),
      author: { id: FAKE_BOT_ID, username: 'berthbot', bot: true },
      mentions: [],
      ...(reference?.message_id ? { message_reference: { message_id: reference.message_id } } : {}),
      ...(nonce !== undefined ? { nonce } : {}),
      ...this.attached(channelId, (body?.files as FakeDiscordFile[] | undefined) ?? []),
    };
    if (row.content.length > 2000) return answer(400, { message: 'Invalid Form Body', code: 50035 });
    this.messages.push(row);
    if (nonce !== undefined) this.nonces.set(nonce, row);
    this.dispatch('MESSAGE_CREATE', row);
    return answer(200, row);
  }
}
