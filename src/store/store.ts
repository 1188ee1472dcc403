/**
 * The Store: every durable state change berth makes, as named transitions. Each method
 * is one transaction. Methods a sandbox's actions reach (startTurn, recordProgress,
 * commitTurn, abortTurn, releaseSession) are fenced: they write only while the session's
 * generation and lease holder are the caller's, and otherwise return 'stale' with
 * nothing written. SQLite and PostgreSQL implement the same interface and pass the same
 * conformance suite.
 */
import type {
  AbortInput,
  Agent,
  AgentSpec,
  ApiTokenRow,
  Channel,
  ChannelFileUse,
  ChannelInbound,
  ChannelOutboxItem,
  ClaimedSession,
  ClaimQueueEntry,
  Clock,
  CommitInput,
  DeliveryDecision,
  FailedStep,
  JournalledResponse,
  LiveSandbox,
  LoggedEvent,
  Message,
  PageRequest,
  Principal,
  RewindResult,
  SandboxRecord,
  Schedule,
  ScheduleInput,
  ScheduleStatus,
  Session,
  SessionCounts,
  SessionEvent,
  SessionView,
  StartedTurn,
  StorageGrant,
  StorageOp,
  StoredObject,
  Turn,
  TurnActivity,
  TurnCheckpoint,
  TurnRecord,
  Webhook,
  WebhookAttempt,
  WebhookDelivery,
  WorkerRegistration,
  WorkerRow,
  WorkspaceChain,
  WorkspaceObjectRef,
} from '../core/index.js';

/** Outcome of a fenced transition. */
export type FenceCode = 'ok' | 'stale' | 'not_found';
/**
 * A commit is fenced by its generation, by the workspace version it ran on, and by its
 * user's interrupt: a turn asked to stop never commits ('interrupted').
 */
export type CommitCode = FenceCode | 'workspace_behind' | 'interrupted';
export type Fenced<T> = { code: 'ok'; value: T } | { code: 'stale' | 'not_found' };

export interface Fence {
  sessionId: string;
  generation: number;
  workerId: string;
}

/** A running turn's progress; `failedStep` (a script step failed) goes into its event's data, written durably. */
export type ProgressInput = Fence & { turnId: string; text: string; failedStep?: FailedStep };

/** A resident workspace's capture to record (Store.recordResidentCapture). */
export type ResidentCaptureInput = Fence & {
  /** The session's workspace version the capture was taken at. */
  version: number;
  /** The data dir it was taken on. */
  holder: string;
  /** Its object (a layer over the last capture, or the whole tree); null when nothing changed. */
  object: (WorkspaceObjectRef & { kind: 'layer' | 'snapshot' }) | null;
  /** The commit it follows; null for a capture before a release. */
  turnId: string | null;
};
export type ResidentCaptureCode =
  | { code: 'ok'; version: number }
  | { code: Exclude<FenceCode, 'ok'> | 'moved' };

export interface AuditEntry {
  kind: string;
  sessionId?: string;
  generation?: number;
  data: Record<string, unknown>;
}

/**
 * Notifications, emitted after the transaction that caused them committed: in this
 * process, and (as hints) in other processes sharing the store. `events` is how another
 * process's new session events arrive: read them from the store.
 */
export type StoreChange =
  | { type: 'enqueued'; sessionId: string; leaseOwner: string | null }
  | { type: 'event'; event: SessionEvent }
  | { type: 'events'; sessionId: string }
  | { type: 'released'; sessionId: string }
  /** The session's running turn was asked to stop: its lease holder aborts it. */
  | { type: 'interrupt'; sessionId: string; leaseOwner: string | null }
  /** A channel has a new send owed (channel_outbox): its poller sends it. */
  | { type: 'channel-outbox'; channelId: string };

export interface EnqueueInput {
  sessionId: string;
  /** Required when the session does not exist yet; must match when it does. */
  agent?: string;
  text: string;
  /** Stored with it (a channel's message: the files sent with it, core/inbox.ts). */
  data?: Record<string, unknown>;
  now: number;
  /** The caller's tenant: the session and agent must be its own (else *_NOT_FOUND). Omitted = the operator. */
  tenant?: string;
}

export interface CreateSessionInput {
  sessionId: string;
  agent: string;
  now: number;
  /** As in EnqueueInput. A new session belongs to its agent's tenant. */
  tenant?: string;
}

export interface NewWebhook {
  id: string;
  tenant: string;
  agent: string | null;
  sessionId: string | null;
  url: string;
  /** Kept in clear: the dispatcher signs every delivery with it. */
  secret: string;
  events: string[];
}

/** A delivery taken for one attempt, with what to send and where. */
export interface TakenDelivery {
  delivery: WebhookDelivery;
  webhook: Webhook & { secret: string };
  event: SessionEvent;
}

export interface AttemptResult {
  deliveryId: number;
  /** The attempt number the delivery was taken with (its fence). */
  attempt: number;
  statusCode: number | null;
  error: string | null;
  durationMs: number;
  decision: DeliveryDecision;
}

export interface NewApiToken {
  id: string;
  /** null for the operator's admin token. */
  tenant: string | null;
  /** SHA-256 (hex) of the secret; the secret itself is never stored. */
  hash: string;
  label: string;
  /** The tenant's weight in the fair share of claims, set with the token; undefined = unchanged. */
  weight?: number;
}

/** A channel to create: validated input and its owner. */
export type NewChannel = Pick<
  Channel,
  | 'id'
  | 'tenant'
  | 'platform'
  | 'agent'
  | 'mapping'
  | 'allowUsers'
  | 'allowChats'
  | 'tokenSecret'
  | 'signingSecret'
  | 'appTokenSecret'
  | 'webhookUrl'
  | 'respondTo'
  | 'email'
>;

/** A schedule to create: validated input, its session, its first due time, the caller's tenant. */
export type NewSchedule = Omit<ScheduleInput, 'agent'> & {
  sessionId: string;
  agent?: string;
  nextRunAt: number;
  tenant?: string;
};

/** One upstream model call, recorded by the gateway's model proxy once its response ended. */
export interface ModelUsageEntry {
  agent: string;
  sessionId: string;
  turnId: string;
  generation: number;
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
}

export interface ModelUsageTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** Distinct turns that made those calls. */
  turns: number;
}

/** A checkpoint to record (its object, if any, already in the blob store): TurnCheckpoint less what the store assigns. */
export interface CheckpointInput {
  turnId: string;
  /** The turn's lead (first) message. */
  messageId: number;
  /** The checkpoint its object is a delta over (0: the committed tree). */
  baseSeq: number;
  /** How many checkpoints of the work its files hold (its base's count + 1). */
  count: number;
  label: string;
  /** '' when nothing changed since the base. */
  key: string;
  size: number;
}

/** A model answer to journal: JournalledResponse, with the work and request it answers. */
export interface ModelResponseInput extends JournalledResponse {
  turnId: string;
  /** The turn's lead (first) message. */
  messageId: number;
  /** sha-256 of the call and its request body, hex. */
  requestHash: string;
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  /**
   * Where every `now` passed to this store should come from: the clock leases are judged
   * by. PostgreSQL: the database server's (DatabaseClock), so machines whose clocks
   * disagree still agree on who holds a lease; SQLite: the machine's own.
   */
  readonly clock: Clock;
  close(): Promise<void>;
  onChange(listener: (change: StoreChange) => void): () => void;

  // `tenant` parameters scope a read or write to one tenant: another tenant's rows look
  // absent (null, NOT_FOUND). Omitted = the operator, who sees every tenant.
  // `page` parameters of listings (list*): one page of the listing in its key order
  // (core/cursor.ts says which), after `page.after`, at most `page.limit`; without a page,
  // every row (the internal callers that need them all).

  /** Throws AGENT_EXISTS. @param tenant owner of the new agent, default DEFAULT_TENANT */
  createAgent(spec: AgentSpec, now: number, tenant?: string): Promise<Agent>;
  getAgent(name: string, tenant?: string): Promise<Agent | null>;
  listAgents(tenant?: string, page?: PageRequest): Promise<Agent[]>;
  /** Replaces the spec (the name stays). Throws AGENT_NOT_FOUND. */
  replaceAgentSpec(spec: AgentSpec, tenant?: string): Promise<Agent>;
  /** Throws AGENT_NOT_FOUND, or AGENT_IN_USE while a session that is not archived uses it. */
  deleteAgent(name: string, now: number, tenant?: string): Promise<void>;

  /** A session without a message yet. Throws AGENT_NOT_FOUND / SESSION_EXISTS. */
  createSession(input: CreateSessionInput): Promise<SessionView>;
  /**
   * Stop and archive: pending and running messages failed, lease cleared and generation
   * bumped (the serving sandbox is fenced off), one 'archived' event. Idempotent.
   * Throws SESSION_NOT_FOUND.
   */
  archiveSession(sessionId: string, now: number, tenant?: string): Promise<SessionView>;
  /** Asks for the session's resident sandbox to be replaced between turns (SESSION_NOT_FOUND, SESSION_ARCHIVED). */
  requestRecycle(sessionId: string, now: number, tenant?: string): Promise<SessionView>;

  /** Creates the session on first use. Throws AGENT_NOT_FOUND / AGENT_REQUIRED / SESSION_AGENT_MISMATCH. */
  /** eventId is the id of the 'queued' event it wrote: follow the session's events after it. */
  enqueueMessage(input: EnqueueInput): Promise<{ message: Message; view: SessionView; eventId: number }>;

  getSessionView(sessionId: string, now: number, tenant?: string): Promise<SessionView | null>;
  /** A tenant's sessions (undefined: every tenant's) in creation order: one page of them, or all without `page`. */
  listSessionViews(now: number, tenant?: string, page?: PageRequest): Promise<SessionView[]>;
  /** What the store keeps counted of a tenant's sessions (undefined: every tenant's); O(1) in the number of sessions. */
  sessionCounts(tenant?: string): Promise<SessionCounts>;
  listMessages(sessionId: string, afterId: number, limit: number): Promise<Message[]>;
  listTurns(sessionId: string, page?: PageRequest): Promise<Turn[]>;
  /** One turn of the session and what the store keeps of it (TurnRecord); null when the session has no such turn. */
  getTurnRecord(sessionId: string, turnId: string): Promise<TurnRecord | null>;
  /** What the timeline of a turn's tries (`attempts`, from getTurnRecord) is made of: their events and model calls. */
  turnActivity(sessionId: string, attempts: Turn[]): Promise<TurnActivity>;
  /** Events after `afterId`, for one session or (null) all sessions (of `tenant`), oldest first. */
  eventsAfter(
    sessionId: string | null,
    afterId: number,
    limit: number,
    tenant?: string,
  ): Promise<SessionEvent[]>;
  /**
   * Every session's events with ids in (afterId, upToId], oldest first, each with its
   * session's tenant: the read of the API's change feed (api/change-feed.ts).
   */
  eventLog(afterId: number, upToId: number, limit: number): Promise<LoggedEvent[]>;
  /** The newest event id (0: none yet): where a change feed starts. */
  lastEventId(): Promise<number>;
  /**
   * A page of the claim queue in claim order (a tenant's: its own queued sessions), with
   * global positions; read without listing the queue (sql/queue-page.ts).
   */
  listQueue(now: number, tenant?: string, page?: PageRequest): Promise<ClaimQueueEntry[]>;
  /** The 1-based claim-queue position of every queued session, in one read (what views show as queuePosition). */
  queuePositions(now: number): Promise<Map<string, number>>;
  /** Mean run time of the last `limit` committed turns in ms; null before the first. */
  meanTurnMs(limit: number): Promise<number | null>;
  listWorkers(): Promise<WorkerRow[]>;
  /** Slots of the workers whose row is fresh (queue ETAs): summed by the store, not listed. */
  liveSlots(now: number): Promise<number>;

  /** A worker's row at its start; one already draining (a rejoin) stays draining. */
  registerWorker(row: WorkerRegistration): Promise<void>;
  /** false when the row is gone: the worker must fence itself. */
  renewWorker(workerId: string, now: number): Promise<boolean>;
  /** A clean stop: the row goes, or, while the worker still holds leases, stays expired so the sweep reclaims them. */
  removeWorker(workerId: string): Promise<void>;
  /** Marks the worker draining (the first time counts): it claims nothing more, then stops. false: no such worker. */
  drainWorker(workerId: string, now: number): Promise<boolean>;
  getWorker(workerId: string): Promise<WorkerRow | null>;

  /** Sessions whose lease holder's row is older than leaseMs: running turns aborted (with retry policy), lease cleared. */
  reclaimExpiredLeases(now: number): Promise<string[]>;
  /** Compare-and-set of the oldest runnable session to leased(worker, generation+1). */
  claimRunnableSession(workerId: string, now: number): Promise<ClaimedSession | null>;
  /** How many sessions wait in the claim queue now. */
  queueDepth(now: number): Promise<number>;
  /** Earliest future time a pending message becomes runnable, for the wake-up timer. */
  nextProcessAfter(now: number): Promise<number | null>;

  recordSandbox(fence: Fence, sandbox: string, now: number): Promise<FenceCode>;
  /**
   * The caller's data dir takes the session's resident workspace, which nobody held or which
   * it materialised from the chain's capture (its marker already written there): it is the
   * holder from now on. Fenced.
   */
  recordResidentHolder(
    input: Fence & { holder: string; holderName: string },
    now: number,
  ): Promise<FenceCode>;
  /**
   * A capture of the resident workspace taken at `version` (after its commit, or before the
   * sandbox is released; its object already in the blob store, null when nothing changed
   * since the last one) enters the chain at that version, as a layer over the last capture or
   * a full snapshot, and the session records it as captured; at the next version when that
   * one has an object already (the version moves on by one). Returns the version recorded.
   * Fenced; 'moved' when the version or the holder moved on.
   */
  recordResidentCapture(input: ResidentCaptureInput, now: number): Promise<ResidentCaptureCode>;
  /**
   * An operator lets a held session go on: its messages are queued again. With
   * `resetWorkspace`, the loss of its resident workspace is accepted first (nobody holds it;
   * recorded in the audit log) and it goes on with an empty one. Throws SESSION_NOT_FOUND,
   * SESSION_NOT_HELD.
   */
  releaseHold(input: {
    sessionId: string;
    resetWorkspace: boolean;
    now: number;
    tenant?: string;
  }): Promise<SessionView>;
  /**
   * The worker's report of its sandboxes' lifecycles (a report older than the stored one is
   * ignored); dead workers' sandboxes not recorded gone are recorded gone (WorkerLost).
   */
  recordSandboxes(records: SandboxRecord[], now: number): Promise<void>;
  /** Sandboxes not gone and those gone since `endedSince`, newest first, at most `limit` (of `tenant`'s sessions). */
  listSandboxes(endedSince: number, limit: number, tenant?: string): Promise<SandboxRecord[]>;
  /** The sandbox the session's lease holds now (not recorded ending), with its worker's control endpoint; null when none. */
  liveSandboxOf(sessionId: string): Promise<LiveSandbox | null>;
  /** Takes the session's runnable pending messages into a new running turn; value null when there are none. */
  startTurn(fence: Fence, now: number): Promise<Fenced<StartedTurn | null>>;
  recordProgress(input: ProgressInput, now: number): Promise<FenceCode>;
  /**
   * Outputs, state, schedules and (with `workspace`) the turn's layer appended to the chain,
   * in one transaction; 'workspace_behind' when the turn ran on another workspace version
   * than the session's, with nothing written.
   */
  commitTurn(input: CommitInput, now: number): Promise<CommitCode>;
  /** The session's workspace chain (its newest snapshot and the layers after it); SESSION_NOT_FOUND. */
  getWorkspaceChain(sessionId: string): Promise<WorkspaceChain>;
  /**
   * Records a snapshot of the session's workspace at `version` (a version it has reached,
   * newer than its last snapshot) and drops the chain's older objects; false when it was not
   * recorded (an older or equal snapshot, a version not reached). Not fenced: a snapshot is
   * the tree of its version whoever made it.
   */
  recordWorkspaceSnapshot(
    input: { sessionId: string; version: number; key: string; size: number },
    now: number,
  ): Promise<boolean>;
  /** Whether some session's chain names this blob-store object (garbage collection keeps it). */
  isWorkspaceObjectNamed(key: string): Promise<boolean>;
  /**
   * Records a checkpoint of a running turn (its object already in the blob store) as the
   * next of the work on its lead message `messageId`, fenced: the generation, the lease and
   * the turn still running under them ('stale' otherwise, nothing written). Moves neither
   * the workspace version, nor replies, nor state.
   */
  recordCheckpoint(input: Fence & CheckpointInput, now: number): Promise<Fenced<TurnCheckpoint>>;
  /** The checkpoints of the work on a lead message, oldest first (a retry resumes from them). */
  listCheckpoints(sessionId: string, messageId: number): Promise<TurnCheckpoint[]>;
  /**
   * Deletes the checkpoints (and journalled model answers) of work that ended without a
   * commit (its lead message no longer pending or processing); returns the checkpoints'
   * objects' keys. A commit deletes its own.
   */
  sweepCheckpoints(): Promise<string[]>;
  /** Whether some checkpoint names this blob-store object (garbage collection keeps it). */
  isCheckpointObjectNamed(key: string): Promise<boolean>;
  /**
   * The rows that may still need a chat file (`channel-files/…`): messages not yet done with
   * that name files, outbox rows not yet sent or dead that send one. Garbage collection keeps
   * what core's neededChannelFiles makes of them.
   */
  channelFileUses(): Promise<ChannelFileUse[]>;
  /**
   * Journals a completed model answer of a running turn, fenced as recordCheckpoint ('stale'
   * otherwise, nothing written). The first answer to a request stays: a repeat is 'ok' and
   * writes nothing. Rows go with the work's checkpoints (its commit, sweepCheckpoints).
   */
  journalModelResponse(input: Fence & ModelResponseInput, now: number): Promise<Fenced<void>>;
  /** The journalled answer to a request of the work on a lead message; null when none. */
  findModelResponse(
    sessionId: string,
    messageId: number,
    requestHash: string,
  ): Promise<JournalledResponse | null>;
  /**
   * A new session of the source's agent whose workspace starts from one of the source's
   * retained versions (`fromVersion`, default its current one) and whose state is the
   * source's: its chain names the source's objects up to that version (nothing is copied).
   * Throws SESSION_NOT_FOUND (the source, as `tenant` sees it), SESSION_EXISTS,
   * SESSION_ARCHIVED, SESSION_BUSY (the source answers messages), VERSION_NOT_RETAINED,
   * INVALID_INPUT (a version not reached).
   */
  forkSession(input: {
    sourceId: string;
    sessionId: string;
    fromVersion?: number;
    now: number;
    tenant?: string;
  }): Promise<SessionView>;
  /**
   * The session's workspace goes back to the tree of `toVersion`, as a new version whose
   * snapshot names the objects of that tree (no byte copied, no row dropped), in one
   * transaction under the session's lock. `emptyTree` is the object used when that tree is
   * empty. Throws SESSION_NOT_FOUND, SESSION_ARCHIVED, SESSION_BUSY (a turn runs or an
   * inbound message is pending or processing), VERSION_NOT_RETAINED, INVALID_INPUT.
   */
  rewindSession(input: {
    sessionId: string;
    toVersion: number;
    now: number;
    tenant?: string;
    emptyTree?: WorkspaceObjectRef;
  }): Promise<RewindResult>;
  /** Committed state of a session (key → JSON value). */
  getState(sessionId: string): Promise<Record<string, unknown>>;
  getTurn(turnId: string): Promise<Turn | null>;
  /** The turn's layer is promoted: clears pendingLayer if it still names this turn. Not fenced: any later owner may finish it. */
  markLayerPromoted(sessionId: string, turnId: string): Promise<void>;
  /**
   * Takes back an inbound message that no turn has taken yet (pending, including one waiting
   * out the backoff of an aborted try): it ends `cancelled`, event `cancelled`, and the
   * messages behind it move up. Cancelling a cancelled message returns it again. Throws
   * SESSION_NOT_FOUND, MESSAGE_NOT_FOUND, MESSAGE_NOT_PENDING (it started or ended).
   */
  cancelMessage(input: {
    sessionId: string;
    messageId: number;
    now: number;
    tenant?: string;
  }): Promise<Message>;
  /**
   * Asks for the session's running turn (`turnId`, when given, must be it) to stop: recorded
   * on the turn, event `interrupting`, a hint to its lease holder. From then on its commit is
   * refused and its abort ends it and its messages `interrupted`. Asking again returns the
   * turn again. Throws SESSION_NOT_FOUND, NO_RUNNING_TURN.
   */
  requestInterrupt(input: {
    sessionId: string;
    turnId?: string;
    now: number;
    tenant?: string;
  }): Promise<Turn>;
  /** Messages of the turn go back to pending with backoff, or are failed after the last try. */
  abortTurn(input: AbortInput, now: number): Promise<FenceCode>;
  /** Gives the session up: lease and sandbox cleared. */
  releaseSession(fence: Fence, now: number): Promise<FenceCode>;

  insertApiToken(token: NewApiToken, now: number): Promise<ApiTokenRow>;
  /** The live (not revoked) token with this hash. */
  principalOfTokenHash(hash: string): Promise<Principal | null>;
  listApiTokens(page?: PageRequest): Promise<ApiTokenRow[]>;
  /** false when no live token has this id. */
  revokeApiToken(id: string, now: number): Promise<boolean>;

  /** Throws AGENT_NOT_FOUND / SESSION_NOT_FOUND when the target is not the tenant's. */
  createWebhook(webhook: NewWebhook, now: number): Promise<Webhook>;
  listWebhooks(tenant?: string, page?: PageRequest): Promise<Webhook[]>;
  getWebhook(id: string, tenant?: string): Promise<Webhook | null>;
  /** false when there is no such live webhook (of the tenant). Pending deliveries stay and are still sent. */
  deleteWebhook(id: string, now: number, tenant?: string): Promise<boolean>;
  /** The next due delivery, taken for one attempt for `leaseMs`; null when none is due. */
  takeWebhookDelivery(now: number, leaseMs: number): Promise<TakenDelivery | null>;
  /** Logs the attempt and applies its decision (delivered / retry at / dead), fenced by the attempt number. */
  recordWebhookAttempt(result: AttemptResult, now: number): Promise<void>;
  /** A delivery's attempts. */
  listWebhookDeliveries(
    webhookId: string,
    afterId: number,
    limit: number,
  ): Promise<(WebhookDelivery & { log: WebhookAttempt[] })[]>;
  /** Sends a delivered or dead one again from scratch; false when there is none (or it is pending). */
  retryWebhookDelivery(deliveryId: number, now: number, tenant?: string): Promise<boolean>;
  /** Deliveries per status, for metrics. */
  webhookDeliveryCounts(): Promise<Record<'pending' | 'delivered' | 'dead', number>>;
  /** Throws AGENT_NOT_FOUND (of the tenant), CHANNEL_EXISTS. */
  createChannel(channel: NewChannel, now: number): Promise<Channel>;
  listChannels(tenant?: string, page?: PageRequest): Promise<Channel[]>;
  getChannel(id: string, tenant?: string): Promise<Channel | null>;
  /** Pause (nothing polled or sent; updates wait at the platform) or resume. Throws CHANNEL_NOT_FOUND. */
  pauseChannel(id: string, paused: boolean, tenant?: string): Promise<Channel>;
  /** false when there is no such live channel (of the tenant). Its sessions stay. */
  deleteChannel(id: string, now: number, tenant?: string): Promise<boolean>;
  /** The caller (a host process) holds the channel's lease until now + leaseMs; false when another does, or it is paused or gone. */
  takeChannelLease(id: string, owner: string, now: number, leaseMs: number): Promise<boolean>;
  releaseChannelLease(id: string, owner: string): Promise<void>;
  /** The last polling or sending error, shown by list; null clears it. */
  recordChannelError(id: string, error: string | null): Promise<void>;
  /**
   * One platform update applied in one transaction, fenced by the lease and the cursor:
   * the cursor moved past it and its message enqueued (session created and bound to the
   * chat on first use), or a chat command run and answered (`/status`, `/interrupt`), or a
   * refusal owed, or nothing. 'stale' = nothing written (the lease is lost, or the update
   * was applied already).
   */
  commitChannelInbound(
    channelId: string,
    owner: string,
    inbound: ChannelInbound,
    now: number,
  ): Promise<'enqueue' | 'command' | 'refuse' | 'ignore' | 'stale'>;
  /**
   * One event a platform pushed (Slack's Events API), applied in one transaction keyed by
   * its id: the id marked applied and its message enqueued (or a chat command run), or a refusal owed, or nothing
   * (`inbound` null: an event without a message). No lease: any API process may take a
   * push. 'duplicate' = the id was applied before (a retried delivery), 'stale' = the
   * channel is gone or paused; nothing written in either.
   */
  commitChannelEvent(
    channelId: string,
    eventId: string,
    inbound: ChannelInbound | null,
    now: number,
  ): Promise<'enqueue' | 'command' | 'refuse' | 'ignore' | 'stale' | 'duplicate'>;
  /**
   * Whether the event `eventId` of the channel was applied: asked before a message's files
   * are fetched, so an event delivered again (a read-back after a reconnect, a mail read
   * again after a crash) does not fetch them again only to be found a duplicate.
   */
  channelEventApplied(channelId: string, eventId: string): Promise<boolean>;
  /**
   * The chats of a channel whose sessions were active since `since`, most recent first, at
   * most `limit`: a platform that reads missed history back chat by chat (Discord) reads
   * these besides its allowlisted chats, so a direct message sent while berth was down is
   * not lost.
   */
  recentChannelChats(channelId: string, since: number, limit: number): Promise<string[]>;
  /** The channel's next due send, taken for one attempt (at-least-once: it is due again after leaseMs). */
  takeChannelSend(
    channelId: string,
    owner: string,
    now: number,
    leaseMs: number,
  ): Promise<ChannelOutboxItem | null>;
  nextChannelSendAt(channelId: string): Promise<number | null>;
  /** One part of a taken send recorded with the platform's message id; false when the attempt is stale. */
  recordChannelPartSent(
    item: Pick<ChannelOutboxItem, 'id' | 'attempts' | 'partsSent' | 'platformMessageIds'>,
    platformMessageId: string,
    done: boolean,
    now: number,
  ): Promise<boolean>;
  /** An attempt that sent nothing more: due again at nextAttemptAt, or dead (null). */
  endChannelSendAttempt(
    item: Pick<ChannelOutboxItem, 'id' | 'attempts'>,
    nextAttemptAt: number | null,
    error: string,
    now: number,
  ): Promise<void>;
  listChannelOutbox(channelId: string, page?: PageRequest): Promise<ChannelOutboxItem[]>;
  /** Checks the session and agent as enqueueMessage does (same errors); the schedule takes the session's tenant. */
  createSchedule(input: NewSchedule, now: number): Promise<Schedule>;
  /** One session's schedules, or (null) all. */
  listSchedules(sessionId: string | null, tenant?: string, page?: PageRequest): Promise<Schedule[]>;
  /** Live (not cancelled) schedules made by the agent's own turns, over all its sessions: what its cap counts. */
  countAgentMadeSchedules(agent: string): Promise<number>;
  /**
   * Pause, resume or cancel (SCHEDULE_NOT_FOUND, SCHEDULE_CANCELLED). A resumed schedule
   * is next due at its first time after now: runs that fell while paused are not sent.
   */
  moveScheduleTo(id: string, status: ScheduleStatus, now: number, tenant?: string): Promise<Schedule>;
  /**
   * Every due active schedule, each in its own transaction: moves next_run_at on by
   * compare-and-set and, when the run is sent (decideScheduleRun), enqueues its message
   * in the same transaction. A due run is handled at most once, whoever else runs this.
   */
  runDueSchedules(now: number): Promise<{ fired: string[]; skipped: string[] }>;

  /** Not fenced: the tokens were spent whichever generation is current by the time the response ended. */
  recordModelUsage(entry: ModelUsageEntry, now: number): Promise<void>;
  /** Totals of the calls matching every given filter (budgets: agent + since; a turn's usage: turnId). */
  sumModelUsage(filter: { agent?: string; turnId?: string; since?: number }): Promise<ModelUsageTotals>;

  // ---- mediated storage. Objects live in their agent's namespace; the store
  // row is the truth (a blob no row names is garbage). Grants and objects of a deleted
  // agent go with it (deleteAgent), so a later agent of the same name starts empty.

  /** Gives the agent `ops` on the keys under `prefix` (replacing that prefix's ops). Throws AGENT_NOT_FOUND. */
  grantStorage(
    grant: { agent: string; prefix: string; ops: StorageOp[] },
    now: number,
    tenant?: string,
  ): Promise<StorageGrant>;
  /** Throws AGENT_NOT_FOUND (another tenant's agent looks absent). */
  listStorageGrants(agent: string, tenant?: string, page?: PageRequest): Promise<StorageGrant[]>;
  /** Throws AGENT_NOT_FOUND, GRANT_NOT_FOUND. */
  revokeStorageGrant(agent: string, prefix: string, tenant?: string): Promise<void>;
  /** Fenced: records key → blob in the namespace of the fenced session's agent. */
  putStorageObject(
    input: Fence & { key: string; sha256: string; size: number; blob: string },
    now: number,
  ): Promise<Fenced<StoredObject>>;
  /** Fenced; value false when there was no such object. */
  deleteStorageObject(input: Fence & { key: string }): Promise<Fenced<boolean>>;
  getStorageObject(agent: string, key: string): Promise<StoredObject | null>;
  /** Up to `limit` objects whose key starts with `prefix`, in key order, after key `after` ('' = first page). */
  listStorageObjects(
    agent: string,
    page: { prefix: string; after: string; limit: number },
  ): Promise<StoredObject[]>;
  /** Whether some object names this blob (garbage collection keeps it). */
  isStorageBlobNamed(blob: string): Promise<boolean>;

  audit(entry: AuditEntry, now: number): Promise<void>;
  listAudit(afterId: number, limit: number): Promise<(AuditEntry & { id: number; at: number })[]>;
}

export type { Session };
