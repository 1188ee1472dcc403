/**
 * The berth SDK: `new Berth({url, token})`, one method per API capability. Parameter
 * types come from the API's own zod schemas (core/api-schemas.ts), results are the core
 * record types, errors are BerthErrors carrying the API's code and hint.
 *
 *   const berth = new Berth({ url: 'http://127.0.0.1:7420', token });
 *   await berth.agents.create({ name: 'sh', provider: 'command' });
 *   const reply = await berth.sessions.send('s1', 'echo hi', { agent: 'sh' });
 *   for await (const e of berth.sessions.events('s1')) console.log(e.type, e.data);
 */
import {
  type Agent,
  type AgentPatch,
  type AgentSpec,
  type AgentSpecInput,
  type ApiTokenRow,
  type AppliedAgent,
  agentSpecOf,
  type Channel,
  type ChannelOutboxItem,
  type CreateChannelBody,
  type CreateSessionBody,
  type CreateTokenBody,
  type CreateWebhookBody,
  type ExecRequest,
  type FilesQuery,
  type ListSessionsQuery,
  type Message,
  type PageQuery,
  type PostMessageBody,
  parseAgentSpec,
  type RewindResult,
  type SandboxRecord,
  type Schedule,
  type ScheduleBody,
  type SessionCounts,
  type SessionView,
  type StorageGrant,
  type StorageGrantBody,
  type StorageListing,
  type Turn,
  type TurnDetail,
  type TurnDiff,
  type TurnTimeline,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
  type WorkerRow,
  type WorkspacePathInfo,
  type WorkspaceSummary,
} from '../core/index.js';
import { ApiClient, type StreamedEvent } from './http.js';
import { type Posted, type Reply, type SendOptions, waitForReply } from './reply-wait.js';
import { sandboxFilesOf } from './sandbox-files.js';

export type { Posted, Reply, SendOptions };

/** GET /v1/sessions with the query's filters and page. */
function sessionsPath(query: ListSessionsQuery): string {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined) qs.set(k, String(v));
  return `/v1/sessions${qs.size ? `?${qs}` : ''}`;
}

export interface BerthOptions {
  /** Where the API listens, e.g. http://127.0.0.1:7420 */
  url: string;
  /** A tenant token (berth token create --tenant T) or the admin token. */
  token?: string;
}

export type SessionWithEta = SessionView & { etaMs: number | null };

/** What `sessions.files` answers: a directory's entries, a link, or a file with its content. */
export type WorkspaceFile =
  | Exclude<WorkspacePathInfo, { type: 'file' }>
  | { type: 'file'; path: string; version: number; size: number; mode: number; content: Buffer };

/** A sandbox as its worker last reported it: its phase, what it serves, and why it ended. */
export type Sandbox = SandboxRecord;

export interface QueueEntry {
  sessionId: string;
  position: number;
  pending: number;
}

export type LiveWorker = WorkerRow & { alive: boolean };

export interface Status {
  /** What the store keeps counted of the caller's sessions. */
  counts: SessionCounts;
  /** Sessions waiting in the claim queue (every tenant's: positions are global). */
  queueDepth: number;
  sandboxes: Sandbox[];
  workers: LiveWorker[];
}

export interface IssuedToken {
  token: string;
  id: string;
  tenant: string;
  label: string;
  createdAt: number;
}

const enc = encodeURIComponent;

export class Berth {
  readonly http: ApiClient;

  constructor(options: BerthOptions) {
    this.http = new ApiClient(options.url, options.token);
  }

  readonly agents = {
    create: (spec: AgentSpecInput) => this.http.request<Agent>('POST', '/v1/agents', spec),
    /**
     * Creates the agent or replaces its whole spec (left-out fields take their defaults) and
     * says what changed. Checked here first: a bad spec throws INVALID_INPUT listing every
     * wrong field by its path, before anything is sent.
     */
    apply: async (spec: AgentSpecInput): Promise<AppliedAgent> => {
      // async: a bad spec rejects the promise like any API error, never throws at the call.
      const checked = parseAgentSpec(spec);
      return this.http.request<AppliedAgent>('PUT', `/v1/agents/${enc(checked.name)}`, spec);
    },
    /** The agent's whole spec, defaults filled in: what `apply` takes back unchanged. */
    show: async (name: string): Promise<AgentSpec> => agentSpecOf(await this.agents.get(name)),
    list: () => this.http.all<Agent>('/v1/agents', 'agents'),
    get: (name: string) => this.http.request<Agent>('GET', `/v1/agents/${enc(name)}`),
    update: (name: string, patch: AgentPatch) =>
      this.http.request<Agent>('PATCH', `/v1/agents/${enc(name)}`, patch),
    delete: (name: string) => this.http.request<null>('DELETE', `/v1/agents/${enc(name)}`),
  };

  readonly sessions = {
    create: (body: CreateSessionBody) => this.http.request<SessionView>('POST', '/v1/sessions', body),
    /** One page, in creation order: pass the previous page's `next` as `after` (null: it was the last). */
    page: (query: ListSessionsQuery = {}) =>
      this.http.request<{ sessions: SessionWithEta[]; next: string | null }>('GET', sessionsPath(query)),
    /** Every session the query matches, page after page. */
    list: (query: Omit<ListSessionsQuery, 'after'> = {}) =>
      this.http.all<SessionWithEta>(sessionsPath(query), 'sessions'),
    get: (id: string) => this.http.request<SessionWithEta>('GET', `/v1/sessions/${enc(id)}`),
    /** Stop and archive. */
    delete: (id: string) => this.http.request<SessionView>('DELETE', `/v1/sessions/${enc(id)}`),
    /** A resident session's sandbox is replaced after its current turn. */
    recycle: (id: string) => this.http.request<SessionView>('POST', `/v1/sessions/${enc(id)}/recycle`),
    /** Lets a held session go on as it is (its resident workspace is back). */
    resume: (id: string) => this.http.request<SessionView>('POST', `/v1/sessions/${enc(id)}/resume`),
    /** Accepts the loss of a held session's resident workspace: it goes on with an empty one. */
    resetWorkspace: (id: string) =>
      this.http.request<SessionView>('POST', `/v1/sessions/${enc(id)}/reset-workspace`),
    /**
     * A new session starting from one of `id`'s retained versions (`fromVersion`, default its
     * current one) and its state; `as` names it, else an id is generated. Throws
     * VERSION_NOT_RETAINED for a version compaction dropped (the message names the oldest kept).
     */
    fork: (id: string, as?: string, options: { fromVersion?: number } = {}) =>
      this.http.request<SessionView>('POST', `/v1/sessions/${enc(id)}/fork`, {
        ...(as === undefined ? {} : { id: as }),
        ...(options.fromVersion === undefined ? {} : { fromVersion: options.fromVersion }),
      }),
    /**
     * The session's workspace goes back to version `toVersion`'s, as a new version (history is
     * kept; `.berth/` transcripts go back with the files). Throws SESSION_BUSY while it
     * answers messages, VERSION_NOT_RETAINED for a version compaction dropped.
     */
    /** What the session's workspace history keeps (retained versions, retention policy) and costs (objects, bytes in the blob store). */
    workspace: (id: string) =>
      this.http.request<WorkspaceSummary>('GET', `/v1/sessions/${enc(id)}/workspace`),
    rewind: (id: string, toVersion: number) =>
      this.http.request<RewindResult>('POST', `/v1/sessions/${enc(id)}/rewind`, { toVersion }),
    /**
     * Stops the running turn now (202): its workspace changes are discarded and its messages
     * end interrupted; the session goes on with its next message. `turn` names the turn meant.
     * Throws NO_RUNNING_TURN when none runs (or it committed first).
     */
    /**
     * Runs a command in the session's live sandbox (a resident agent's keeps one between
     * turns): yields `{type:'stdout'|'stderr', data}` lines as they come, then one
     * `{type:'exit', exitCode}` or `{type:'error', code, message}` (SANDBOX_RESTARTED when the
     * sandbox ended meanwhile). Aborting `signal` kills the command.
     */
    exec: (id: string, body: ExecRequest, signal?: AbortSignal) => this.http.exec(id, body, signal),
    /** The files of the session's live sandbox, as it sees them now (sandbox-files.ts); `files` is the committed history. */
    sandboxFiles: sandboxFilesOf(() => this.http),
    interrupt: async (id: string, options: { turn?: string } = {}) => {
      const qs = new URLSearchParams({ discard: 'true', ...(options.turn ? { turn: options.turn } : {}) });
      return (await this.http.request<{ turn: Turn }>('POST', `/v1/sessions/${enc(id)}/interrupt?${qs}`))
        .turn;
    },
    /**
     * Takes back a message no turn has taken yet (pending, also one waiting out a retry): it
     * ends cancelled and is never run. Throws MESSAGE_NOT_PENDING once it started or ended.
     */
    cancelMessage: async (id: string, messageId: number) =>
      (
        await this.http.request<{ message: Message }>(
          'DELETE',
          `/v1/sessions/${enc(id)}/messages/${messageId}`,
        )
      ).message,
    /** Posts a message and returns at once (202): the message, the session and where to follow it from. */
    post: (id: string, body: PostMessageBody) =>
      this.http.request<Posted>('POST', `/v1/sessions/${enc(id)}/messages`, body),
    /** Posts a message and waits for its reply; throws SANDBOX_FAILED when it failed after its last try. */
    send: async (id: string, text: string, options: SendOptions = {}): Promise<Reply> => {
      const posted = await this.sessions.post(id, {
        text,
        ...(options.agent ? { agent: options.agent } : {}),
      });
      return this.waitForReply(id, posted, options);
    },
    /** The session's events after `after` (default: from the start), live, until the loop stops or `signal` aborts. */
    events: (id: string, options: { after?: number; signal?: AbortSignal } = {}) =>
      this.http.events(id, options.after ?? 0, options.signal),
    messages: (id: string, page: PageQuery = {}) => {
      const qs = new URLSearchParams({ after: String(page.after ?? 0), limit: String(page.limit ?? 100) });
      return this.http.request<{ messages: Message[]; next: number | null }>(
        'GET',
        `/v1/sessions/${enc(id)}/messages?${qs}`,
      );
    },
    turns: (id: string) => this.http.all<Turn>(`/v1/sessions/${enc(id)}/turns`, 'turns'),
    /** One turn, by id or by the workspace version its commit made: attempts, messages, replies, state, timing, faults. */
    turn: (id: string, turn: string | number) =>
      this.http.request<TurnDetail>('GET', `/v1/sessions/${enc(id)}/turns/${enc(String(turn))}`),
    /** A turn's timeline: its tries and, in time order, model calls, tool calls, checkpoints, kills and resumes. */
    timeline: (id: string, turn: string | number) =>
      this.http.request<TurnTimeline>('GET', `/v1/sessions/${enc(id)}/turns/${enc(String(turn))}/timeline`),
    /** What a committed turn (or, by version, a rewind) changed: files added, modified, deleted, renamed; text diffs, sizes for binaries. */
    diff: (id: string, turn: string | number) =>
      this.http.request<TurnDiff & { turnId: string | null; rewoundTo?: number }>(
        'GET',
        `/v1/sessions/${enc(id)}/turns/${enc(String(turn))}/diff`,
      ),
    /**
     * The workspace as of `version` (default: the current one): a directory's entries, a
     * link, or a file with its content. VERSION_NOT_RETAINED names the versions still kept.
     */
    files: async (id: string, query: FilesQuery = {}): Promise<WorkspaceFile> => {
      const qs = new URLSearchParams();
      if (query.version !== undefined) qs.set('version', String(query.version));
      if (query.path) qs.set('path', query.path);
      const res = await this.http.requestBytes(`/v1/sessions/${enc(id)}/files${qs.size ? `?${qs}` : ''}`);
      if (res.contentType.startsWith('application/json'))
        return JSON.parse(res.bytes.toString('utf8')) as WorkspaceFile;
      return {
        type: 'file',
        path: decodeURIComponent(res.headers.get('x-berth-path') ?? ''),
        version: Number(res.headers.get('x-berth-version')),
        size: res.bytes.length,
        mode: Number.parseInt(res.headers.get('x-berth-mode') ?? '644', 8),
        content: res.bytes,
      };
    },
  };

  /** Recurring messages to a session (cron in a time zone). */
  readonly schedules = {
    create: (sessionId: string, body: ScheduleBody) =>
      this.http.request<Schedule>('POST', `/v1/sessions/${enc(sessionId)}/schedules`, body),
    list: (sessionId?: string) =>
      this.http.all<Schedule>(
        sessionId ? `/v1/sessions/${enc(sessionId)}/schedules` : '/v1/schedules',
        'schedules',
      ),
    pause: (id: string) => this.http.request<Schedule>('POST', `/v1/schedules/${enc(id)}/pause`),
    resume: (id: string) => this.http.request<Schedule>('POST', `/v1/schedules/${enc(id)}/resume`),
    cancel: (id: string) => this.http.request<Schedule>('POST', `/v1/schedules/${enc(id)}/cancel`),
  };

  readonly tokens = {
    create: (body: CreateTokenBody) => this.http.request<IssuedToken>('POST', '/v1/tokens', body),
    list: () => this.http.all<ApiTokenRow>('/v1/tokens', 'tokens'),
    revoke: (id: string) => this.http.request<null>('DELETE', `/v1/tokens/${enc(id)}`),
  };

  /** What an agent's sandboxes may do in its mediated storage, and what it stored. */
  readonly storage = {
    grants: (agent: string) => this.http.all<StorageGrant>(`/v1/agents/${enc(agent)}/grants`, 'grants'),
    grant: (agent: string, body: StorageGrantBody) =>
      this.http.request<StorageGrant>('POST', `/v1/agents/${enc(agent)}/grants`, body),
    revoke: (agent: string, prefix: string) =>
      this.http.request<null>('DELETE', `/v1/agents/${enc(agent)}/grants?${new URLSearchParams({ prefix })}`),
    list: (agent: string, page: { prefix?: string; after?: string; limit?: number } = {}) => {
      const qs = new URLSearchParams(
        Object.entries(page)
          .filter(([, v]) => v !== undefined)
          .map(([k, v]): [string, string] => [k, String(v)]),
      );
      return this.http.request<StorageListing>('GET', `/v1/agents/${enc(agent)}/storage?${qs}`);
    },
  };

  readonly webhooks = {
    /** The answer's `secret` signs every delivery (check it with verifyWebhookSignature). */
    create: (body: CreateWebhookBody) =>
      this.http.request<Webhook & { secret: string }>('POST', '/v1/webhooks', body),
    list: () => this.http.all<Webhook>('/v1/webhooks', 'webhooks'),
    delete: (id: string) => this.http.request<null>('DELETE', `/v1/webhooks/${enc(id)}`),
    deliveries: (id: string, page: PageQuery = {}) => {
      const qs = new URLSearchParams({ after: String(page.after ?? 0), limit: String(page.limit ?? 100) });
      return this.http.request<{
        deliveries: (WebhookDelivery & { log: WebhookAttempt[] })[];
        next: number | null;
      }>('GET', `/v1/webhooks/${enc(id)}/deliveries?${qs}`);
    },
    /** Sends a dead letter again from its first attempt. */
    retry: (id: string, deliveryId: number) =>
      this.http.request<{ retried: true }>('POST', `/v1/webhooks/${enc(id)}/deliveries/${deliveryId}/retry`),
  };

  /** Chat platforms in front of agents (admin token only: a channel names a host secret). */
  readonly channels = {
    create: (body: CreateChannelBody) => this.http.request<Channel>('POST', '/v1/channels', body),
    list: () => this.http.all<Channel>('/v1/channels', 'channels'),
    pause: (id: string) => this.http.request<Channel>('POST', `/v1/channels/${enc(id)}/pause`),
    resume: (id: string) => this.http.request<Channel>('POST', `/v1/channels/${enc(id)}/resume`),
    delete: (id: string) => this.http.request<null>('DELETE', `/v1/channels/${enc(id)}`),
    outbox: (id: string) => this.http.all<ChannelOutboxItem>(`/v1/channels/${enc(id)}/outbox`, 'outbox'),
  };

  status(): Promise<Status> {
    return this.http.request<Status>('GET', '/v1/status');
  }

  /** The whole claim queue, page after page (a tenant's: its own sessions). */
  queue(): Promise<QueueEntry[]> {
    return this.http.all<QueueEntry>('/v1/queue', 'queue');
  }

  async sandboxes(): Promise<Sandbox[]> {
    return (await this.http.request<{ sandboxes: Sandbox[] }>('GET', '/v1/sandboxes')).sandboxes;
  }

  async workers(): Promise<LiveWorker[]> {
    return (await this.http.request<{ workers: LiveWorker[] }>('GET', '/v1/workers')).workers;
  }

  /** Drains a worker (admin), as its SIGTERM does: it claims nothing more, lets its running turns finish within its drain grace, then stops. */
  async drainWorker(id: string): Promise<LiveWorker> {
    return (await this.http.request<{ worker: LiveWorker }>('POST', `/v1/workers/${enc(id)}/drain`)).worker;
  }

  /** Events of every session the token may see, live. */
  events(options: { after?: number; signal?: AbortSignal } = {}): AsyncGenerator<StreamedEvent> {
    return this.http.stream('/v1/events', options.after ?? 0, options.signal);
  }

  /**
   * Follows the session's events from the post's 'queued' event until the reply that answers
   * this message, its failure, or the session being held (reply-wait.ts).
   */
  waitForReply(id: string, posted: Posted, options: SendOptions = {}): Promise<Reply> {
    return waitForReply((after, signal) => this.sessions.events(id, { after, signal }), id, posted, options);
  }
}
