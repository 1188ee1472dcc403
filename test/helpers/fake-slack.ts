/**
 * A local Slack for tests: the Web API methods berth calls, speaking the real wire protocol
 * (`<url>/<method>`, `Authorization: Bearer <token>`, JSON or query parameters, answered
 * `{ok: true, …}` or `{ok: false, error}`; a 429 with `Retry-After` on demand), and a
 * sender of Events API requests signed as Slack signs them (`X-Slack-Signature`: v0
 * HMAC-SHA256 of `v0:<timestamp>:<body>` with the signing secret).
 *
 * - chat.postMessage: recorded and stored in its thread with its metadata; ts counts up.
 * - conversations.replies: a thread's messages (the root's and its replies), with metadata
 *   when include_all_metadata is set.
 * - apps.connections.open (with the app-level token only): a Socket Mode URL on this server.
 *   A connection is greeted with `hello`; events are sent as `events_api` envelopes, and every
 *   envelope not acknowledged (`{envelope_id}`) is delivered again to the next connection,
 *   as Slack does. A test can send a malformed frame or a `disconnect`.
 * - Files a user shares (addFile): served at their url_private_download, to the bot token
 *   as a Bearer header only (anything else: 403), each GET recorded in `downloads`.
 * - files.getUploadURLExternal (filename, length) → an upload_url on this server and a file
 *   id; the bytes POSTed there (no token: the URL is the key); files.completeUploadExternal
 *   shares the uploaded files in channel_id / thread_ts, each length checked, into `uploaded`.
 * Every call is recorded (method, parameters, status) so a test can count.
 */
import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type WebSocket, WebSocketServer } from 'ws';
import { closeLocal, listenLocal } from './local-server.js';

/** An events_api envelope the fake sent, and whether (and how often) it was acknowledged. */
export interface SocketEnvelope {
  envelopeId: string;
  eventId: string;
  payload: unknown;
  deliveries: number;
  acks: number;
}

export interface FakeSlackCall {
  method: string;
  params: Record<string, unknown>;
  status: number;
  at: number;
}

export interface SlackPosted {
  channel: string;
  ts: string;
  threadTs: string | null;
  text: string;
  metadata: { event_type: string; event_payload: Record<string, unknown> } | null;
  at: number;
}

/** A file a user shared, as a message event names it. */
export interface SlackSharedFile {
  id: string;
  name: string;
  size: number;
  url_private_download: string;
}

/** A file the bot uploaded and shared. */
export interface SlackUploaded {
  id: string;
  name: string;
  bytes: Buffer;
  channel: string;
  threadTs: string | null;
}

export class FakeSlack {
  /** Files users shared, by id, and every download of one (id, with the right token or not). */
  private readonly files = new Map<string, Buffer>();
  readonly downloads: { id: string; authorized: boolean }[] = [];
  /** Upload URLs handed out, by file id: the name, the length promised, the bytes once POSTed. */
  private readonly uploads = new Map<string, { name: string; length: number; bytes: Buffer | null }>();
  readonly uploaded: SlackUploaded[] = [];
  readonly calls: FakeSlackCall[] = [];
  readonly posted: SlackPosted[] = [];
  private seq = 0;
  private eventSeq = 0;
  private readonly failures = new Map<string, { count: number; retryAfter: number }>();
  private server = createServer((req, res) => void this.handle(req, res));
  private readonly sockets = new WebSocketServer({ noServer: true });
  private live: WebSocket | null = null;
  /** Every Socket Mode envelope sent, in order. */
  readonly envelopes: SocketEnvelope[] = [];
  /** Socket Mode connections opened so far. */
  socketConnections = 0;
  url = '';

  constructor(
    readonly token: string,
    readonly signingSecret: string,
    readonly appToken = 'xapp-1-test',
  ) {
    this.server.on('upgrade', (req, socket, head) =>
      this.sockets.handleUpgrade(req, socket, head, (ws) => this.onSocket(ws)),
    );
  }

  /** An event over Socket Mode: sent now if a connection is open, else when the next one opens. */
  socketEvent(body: string): SocketEnvelope {
    const payload = JSON.parse(body) as { event_id: string };
    const envelope: SocketEnvelope = {
      envelopeId: `env-${this.envelopes.length + 1}`,
      eventId: payload.event_id,
      payload,
      deliveries: 0,
      acks: 0,
    };
    this.envelopes.push(envelope);
    if (this.live) this.deliverEnvelope(this.live, envelope);
    return envelope;
  }

  /** A raw frame on the open connection (a malformed one, a disconnect). */
  socketFrame(text: string): void {
    this.live?.send(text);
  }

  /** Whether a Socket Mode connection is open. */
  get socketOpen(): boolean {
    return this.live !== null;
  }

  private onSocket(ws: WebSocket): void {
    this.socketConnections += 1;
    this.live = ws;
    ws.on('close', () => {
      if (this.live === ws) this.live = null;
    });
    ws.on('message', (data) => {
      const ack = JSON.parse(String(data)) as { envelope_id?: string };
      const envelope = this.envelopes.find((e) => e.envelopeId === ack.envelope_id);
      if (envelope) envelope.acks += 1;
    });
    ws.send(
      JSON.stringify({
        type: 'hello',
        num_connections: 1,
        debug_info: { host: 'fake-slack', approximate_connection_time: 18060 },
        connection_info: { app_id: 'A0001' },
      }),
    );
    // Slack delivers what was not acknowledged again, marked as a retry.
    for (const envelope of this.envelopes) if (envelope.acks === 0) this.deliverEnvelope(ws, envelope);
  }

  private deliverEnvelope(ws: WebSocket, envelope: SocketEnvelope): void {
    ws.send(
      JSON.stringify({
        envelope_id: envelope.envelopeId,
        type: 'events_api',
        accepts_response_payload: false,
        retry_attempt: envelope.deliveries,
        retry_reason: envelope.deliveries > 0 ? 'timeout' : '',
        payload: envelope.payload,
      }),
    );
    envelope.deliveries += 1;
  }

  async start(): Promise<this> {
    this.url = await listenLocal(this.server, '/api');
    return this;
  }

  async close(): Promise<void> {
    for (const ws of this.sockets.clients) ws.terminate();
    this.sockets.close();
    closeLocal(this.server);
  }

  /** The next `count` calls of `method` answer 429 with Retry-After. */
  rateLimitNext(method: string, count: number, retryAfterSeconds: number): void {
    this.failures.set(method, { count, retryAfter: retryAfterSeconds });
  }

  callsOf(method: string): FakeSlackCall[] {
    return this.calls.filter((c) => c.method === method);
  }

  /** A fresh ts, as Slack makes them (seconds.micro), increasing. */
  nextTs(): string {
    this.seq += 1;
    return `1700000000.${String(this.seq).padStart(6, '0')}`;
  }

  /** A file a user shares: served at its url_private_download; `reportedSize` overrides the size Slack names. */
  addFile(name: string, bytes: Buffer, reportedSize = bytes.length): SlackSharedFile {
    const id = `F${String(this.files.size + 1).padStart(8, '0')}`;
    this.files.set(id, bytes);
    const origin = this.url.replace(/\/api$/, '');
    return {
      id,
      name,
      size: reportedSize,
      url_private_download: `${origin}/files-pri/T0001-${id}/download/${encodeURIComponent(name)}`,
    };
  }

  /** An Events API body for a user's message (`message` or `app_mention`). */
  messageEvent(input: {
    channel: string;
    user: string;
    text: string;
    type?: 'message' | 'app_mention';
    channelType?: string;
    threadTs?: string;
    eventId?: string;
    files?: SlackSharedFile[];
  }): { body: string; eventId: string; ts: string } {
    this.eventSeq += 1;
    const ts = this.nextTs();
    const eventId = input.eventId ?? `Ev${String(this.eventSeq).padStart(8, '0')}`;
    const body = JSON.stringify({
      token: 'deprecated-verification-token',
      team_id: 'T0001',
      api_app_id: 'A0001',
      type: 'event_callback',
      event_id: eventId,
      event_time: Math.floor(Date.now() / 1000),
      event: {
        type: input.type ?? 'message',
        channel: input.channel,
        channel_type: input.channelType ?? 'channel',
        user: input.user,
        text: input.text,
        ts,
        event_ts: ts,
        ...(input.threadTs ? { thread_ts: input.threadTs } : {}),
        // Slack names a message with files a file_share, each file with more fields than these.
        ...(input.files
          ? {
              subtype: 'file_share',
              files: input.files.map((f) => ({
                ...f,
                mimetype: 'text/plain',
                url_private: f.url_private_download,
              })),
            }
          : {}),
      },
    });
    return { body, eventId, ts };
  }

  /** Posts a body to berth's Events endpoint as Slack does; `sign: false` or a wrong secret forges it. */
  async deliver(
    endpoint: string,
    body: string,
    options: { secret?: string; timestamp?: number; retryNum?: number } = {},
  ): Promise<{ status: number; body: string }> {
    const timestamp = String(options.timestamp ?? Math.floor(Date.now() / 1000));
    const signature = `v0=${createHmac('sha256', options.secret ?? this.signingSecret)
      .update(`v0:${timestamp}:${body}`)
      .digest('hex')}`;
    const res = await fetch(endpoint, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-slack-request-timestamp': timestamp,
        'x-slack-signature': signature,
        ...(options.retryNum
          ? { 'x-slack-retry-num': String(options.retryNum), 'x-slack-retry-reason': 'http_timeout' }
          : {}),
      },
      body,
    });
    return { status: res.status, body: await res.text() };
  }

  /**
   * Delivers an event as Slack does when berth does not acknowledge it (no answer, or not a
   * 2xx): again with `X-Slack-Retry-Num`, up to three retries, here after `delaysMs` (Slack
   * retries nearly at once, then after a minute, then after five). Resolves to the last
   * answer, or null when none came.
   */
  async deliverWithRetries(
    endpoint: string,
    body: string,
    delaysMs: readonly number[] = [1_000, 2_000, 4_000],
  ): Promise<{ status: number; body: string } | null> {
    let last: { status: number; body: string } | null = null;
    for (let retryNum = 0; retryNum <= delaysMs.length; retryNum++) {
      if (retryNum > 0) await new Promise((r) => setTimeout(r, delaysMs[retryNum - 1]));
      last = await this.deliver(endpoint, body, { retryNum }).catch(() => null);
      if (last !== null && last.status >= 200 && last.status < 300) return last;
    }
    return last;
  }

  /** A shared file's bytes, to the bot token only; an upload's bytes, to whoever has its URL. */
  private serveFile(url: URL, req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    const download = /^\/files-pri\/T0001-(F[0-9]+)\//.exec(url.pathname);
    if (download) {
      const authorized = req.headers.authorization === `Bearer ${this.token}`;
      this.downloads.push({ id: download[1]!, authorized });
      const bytes = this.files.get(download[1]!);
      res.writeHead(!authorized ? 403 : bytes ? 200 : 404, { 'content-type': 'application/octet-stream' });
      res.end(authorized ? bytes : undefined);
      return;
    }
    const upload = this.uploads.get(url.pathname.replace(/^\/upload\/v1\//, ''));
    if (upload && req.method === 'POST') upload.bytes = body;
    res.writeHead(upload ? 200 : 404, { 'content-type': 'text/plain' });
    res.end(upload ? `OK - ${body.length}` : 'Not Found');
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (!url.pathname.startsWith('/api/')) return this.serveFile(url, req, res, Buffer.concat(chunks));
    const method = url.pathname.replace(/^\/api\//, '');
    const raw = Buffer.concat(chunks).toString('utf8');
    const params: Record<string, unknown> = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
    for (const [k, v] of url.searchParams) params[k] = v;
    const answer = (status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
      this.calls.push({ method, params, status, at: performance.now() });
      res.writeHead(status, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(body));
    };
    // Socket Mode is opened with the app-level token; every other method with the bot token.
    const wanted = method === 'apps.connections.open' ? this.appToken : this.token;
    if (req.headers.authorization !== `Bearer ${wanted}`)
      return answer(200, {
        ok: false,
        error:
          req.headers.authorization === `Bearer ${this.token}` ? 'not_allowed_token_type' : 'invalid_auth',
      });
    const failure = this.failures.get(method);
    if (failure && failure.count > 0) {
      failure.count -= 1;
      return answer(429, { ok: false, error: 'ratelimited' }, { 'retry-after': String(failure.retryAfter) });
    }
    switch (method) {
      case 'chat.postMessage': {
        if (
          typeof params.channel !== 'string' ||
          (!params.channel.startsWith('C') && !params.channel.startsWith('D'))
        )
          return answer(200, { ok: false, error: 'channel_not_found' });
        const posted: SlackPosted = {
          channel: params.channel,
          ts: this.nextTs(),
          threadTs: (params.thread_ts as string | undefined) ?? null,
          text: String(params.text ?? ''),
          metadata: (params.metadata as SlackPosted['metadata']) ?? null,
          at: performance.now(),
        };
        this.posted.push(posted);
        return answer(200, {
          ok: true,
          channel: posted.channel,
          ts: posted.ts,
          message: { text: posted.text },
        });
      }
      case 'conversations.replies': {
        const thread = String(params.ts ?? '');
        const withMetadata = params.include_all_metadata === 'true';
        const messages = this.posted
          .filter((p) => p.channel === params.channel && (p.threadTs === thread || p.ts === thread))
          .map((p) => ({
            type: 'message',
            ts: p.ts,
            thread_ts: p.threadTs ?? undefined,
            bot_id: 'B0001',
            text: p.text,
            ...(withMetadata && p.metadata ? { metadata: p.metadata } : {}),
          }));
        return answer(200, { ok: true, messages, has_more: false });
      }
      case 'files.getUploadURLExternal': {
        const length = Number(params.length);
        if (typeof params.filename !== 'string' || !Number.isSafeInteger(length) || length < 1)
          return answer(200, { ok: false, error: 'invalid_arguments' });
        const fileId = `F9${String(this.uploads.size + 1).padStart(7, '0')}`;
        this.uploads.set(fileId, { name: params.filename, length, bytes: null });
        const origin = this.url.replace(/\/api$/, '');
        return answer(200, { ok: true, upload_url: `${origin}/upload/v1/${fileId}`, file_id: fileId });
      }
      case 'files.completeUploadExternal': {
        const files = params.files as { id: string; title?: string }[] | undefined;
        const channel = params.channel_id;
        if (!Array.isArray(files) || typeof channel !== 'string')
          return answer(200, { ok: false, error: 'invalid_arguments' });
        for (const f of files) {
          const upload = this.uploads.get(f.id);
          if (!upload?.bytes || upload.bytes.length !== upload.length)
            return answer(200, { ok: false, error: 'file_not_found' });
        }
        for (const f of files) {
          const upload = this.uploads.get(f.id)!;
          this.uploaded.push({
            id: f.id,
            name: upload.name,
            bytes: upload.bytes!,
            channel,
            threadTs: (params.thread_ts as string | undefined) ?? null,
          });
        }
        return answer(200, { ok: true, files: files.map((f) => ({ id: f.id, title: f.title ?? '' })) });
      }
      case 'apps.connections.open':
        return answer(200, {
          ok: true,
          url: `${this.url.replace(/^http/, 'ws').replace(/\/api$/, '')}/link/?ticket=t${this.socketConnections + 1}&app_id=A0001`,
        });
      default:
        return answer(200, { ok: false, error: 'unknown_method' });
    }
  }
}
