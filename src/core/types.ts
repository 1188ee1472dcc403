/** Domain records as the store returns them. Times are epoch ms. */
import type { AgentSpec } from './agent.js';
import type { ErrorCode } from './errors.js';
import type { InboxFile } from './inbox.js';
import type { TurnOutput } from './protocol.js';
import type { ResidentRecord } from './resident-workspace.js';
import type { SandboxPhase } from './sandbox-lifecycle.js';
import type { TurnSchedule } from './schedule.js';

/**
 * An inbound message's states (docs/state-machine.md): `done`, `failed`, `cancelled` (taken
 * back while pending) and `interrupted` (its turn was interrupted) are final.
 */
export type MessageStatus = 'pending' | 'processing' | 'done' | 'failed' | 'cancelled' | 'interrupted';
/** A turn's states: `committed`, `aborted` and `interrupted` (stopped by its user, nothing kept) are final. */
export type TurnStatus = 'running' | 'committed' | 'aborted' | 'interrupted';
export type SessionStatus =
  | 'idle'
  | 'queued'
  | 'backoff'
  | 'starting'
  | 'running'
  | 'bound'
  | 'failed'
  | 'held'
  | 'archived';

/** Owner of agents and sessions; an API token belongs to one tenant (or is the operator's admin token). */
export const DEFAULT_TENANT = 'default';

export interface Agent extends AgentSpec {
  tenant: string;
  createdAt: number;
}

/** The agent's spec alone, as a file holds it and PUT /v1/agents/:name takes it back. */
export function agentSpecOf(agent: Agent): AgentSpec {
  const { tenant: _, createdAt: __, ...spec } = agent;
  return spec;
}

export interface Session {
  id: string;
  agent: string;
  generation: number;
  leaseOwner: string | null;
  sandbox: string | null;
  /** Committed turns so far: each commit is a new workspace version. */
  workspaceVersion: number;
  /** A committed turn whose layer is not promoted yet: promote it before any new attempt mounts. */
  pendingLayer: string | null;
  tenant: string;
  /** Set by DELETE /v1/sessions/:id: the session takes no more messages and its lease is fenced off. */
  archivedAt: number | null;
  /** Latest request to replace its resident sandbox (POST /v1/sessions/:id/recycle). */
  recycleRequestedAt: number | null;
  /** Where its resident workspace lives (written in place, on one data dir only): resident-workspace.ts. */
  resident: ResidentRecord;
  /**
   * Why the session is out of the claim queue, its messages kept pending, until an operator
   * acts (POST /v1/sessions/:id/resume or /reset-workspace); null when it is not held.
   */
  hold: { code: ErrorCode; message: string; since: number } | null;
  createdAt: number;
  updatedAt: number;
}

export interface Message {
  id: number;
  sessionId: string;
  direction: 'in' | 'out';
  text: string;
  data: unknown;
  status: MessageStatus;
  tries: number;
  processAfter: number;
  turnId: string | null;
  /** A reply's: the inbound messages it answers (one for a per-message provider, every message of its turn for a model or harness); null for an inbound message. */
  inReplyTo: number[] | null;
  /** Why it was last retried or failed; errorCode is its catalogue code. */
  error: string | null;
  errorCode: ErrorCode | null;
  createdAt: number;
}

export interface Turn {
  id: string;
  sessionId: string;
  attempt: number;
  generation: number;
  workerId: string;
  sandbox: string | null;
  status: TurnStatus;
  progress: string | null;
  /** Why an aborted turn ended; errorCode is its catalogue code. */
  error: string | null;
  errorCode: ErrorCode | null;
  /** The workspace version a committed turn ran on (null before its commit). */
  baseVersion: number | null;
  /**
   * When its user asked for it to be interrupted (POST /v1/sessions/:id/interrupt): from then
   * on its commit is refused and any abort of it ends it `interrupted`. null when not asked.
   */
  interruptRequestedAt: number | null;
  messageIds: number[];
  startedAt: number;
  endedAt: number | null;
}

/** Who an API token speaks for: one tenant, or the operator (admin: every tenant). */
export interface Principal {
  tokenId: string;
  tenant: string | null;
  admin: boolean;
}

export interface ApiTokenRow extends Principal {
  label: string;
  createdAt: number;
  revokedAt: number | null;
}

export interface WorkerRow {
  id: string;
  host: string;
  pid: number;
  slots: number;
  heartbeatAt: number;
  startedAt: number;
  /** When it began to drain (its SIGTERM, or `berth worker drain`): it claims nothing more. Null while it serves. */
  drainingSince: number | null;
}

/** Where the API reaches a worker's control endpoint, and the key it presents there (docs/sandbox-api.md). */
export interface WorkerControl {
  /** http://host:port */
  url: string;
  /** The worker's random key for this process: Authorization: Bearer <key>. */
  key: string;
}

/** A worker's row at its start, with its control endpoint when it serves one. */
export type WorkerRegistration = Omit<WorkerRow, 'drainingSince'> & { control?: WorkerControl };

/** The sandbox a session's lease holds now, and how to reach the worker holding it. */
export interface LiveSandbox {
  name: string;
  workerId: string;
  generation: number;
  /** Its worker's last report; null before the first (reports lag moves by up to a second). */
  phase: SandboxPhase | null;
  /** Null: the worker's row is gone, or it serves no control endpoint. */
  control: WorkerControl | null;
  /** The worker row's heartbeat (0 when the row is gone). */
  workerHeartbeatAt: number;
}

/** One session waiting in the claim queue (GET /v1/queue). */
export interface ClaimQueueEntry {
  sessionId: string;
  tenant: string;
  /** 1-based place in claim order, counting every tenant's sessions ahead. */
  position: number;
  /** Its pending inbound messages. */
  pending: number;
  /** Its first pending message: its place in its tenant's part of the queue. */
  firstId: number;
  /** Its key in the fair share when listed (null: its tenant has no share row, after every other). */
  fairKey: number | null;
}

/** What a client sees of a session. */
export interface SessionView extends Session {
  status: SessionStatus;
  /** 1-based place among runnable sessions in claim order; null when not queued. */
  queuePosition: number | null;
  pending: number;
  /**
   * The session's oldest pending message while it waits out its backoff (status `backoff`):
   * the messages after it wait for it, in order. null when nothing is held.
   */
  heldBy: { messageId: number; runnableAt: number } | null;
  lastReply: Message | null;
  currentTurn: Turn | null;
}

/**
 * What the store keeps counted of a tenant's sessions (or every tenant's), kept in the
 * transaction of each change: O(1) to read, whatever the number of sessions.
 */
export interface SessionCounts {
  sessions: number;
  archived: number;
  /** Out of the claim queue until an operator acts. */
  held: number;
  /** Leased to a worker. */
  leased: number;
  /** With a sandbox bound. */
  bound: number;
  /** With a pending inbound message (queued, or waiting out a backoff). */
  waiting: number;
  runningTurns: number;
  /** Inbound messages by status. */
  messages: { pending: number; processing: number; failed: number };
}

/** One page of a listing, oldest first; `after` is the previous page's cursor (none: the first page). */
export interface PageRequest {
  after?: string;
  limit: number;
}

export type SessionEventType =
  | 'queued'
  | 'started'
  | 'progress'
  | 'checkpoint'
  | 'reply'
  | 'retrying'
  | 'failed'
  | 'held'
  | 'archived'
  | 'cancelled'
  | 'interrupting'
  | 'interrupted'
  | 'rewound';

export interface SessionEvent {
  id: number;
  sessionId: string;
  type: SessionEventType;
  data: Record<string, unknown>;
  createdAt: number;
}

/** An event as the event log holds it for a change feed: with its session's tenant (null: no such session). */
export interface LoggedEvent extends SessionEvent {
  tenant: string | null;
}

export interface ClaimedSession {
  session: Session;
  agent: Agent;
}

/** What the store keeps of one turn (GET /v1/sessions/:id/turns/:turn). */
export interface TurnRecord {
  turn: Turn;
  /** Every turn that took any of its messages (its retries and the attempts before it), in the order they started. */
  attempts: Turn[];
  /** The inbound messages its attempts took, by id. */
  messages: Message[];
  /** What it committed as replies (none unless committed). */
  replies: Message[];
  /** The state keys whose committed value it wrote and still holds; a later turn's put or delete of a key replaces it. */
  state: Record<string, unknown>;
}

export interface StartedTurn {
  turn: Turn;
  messages: Message[];
}

/** An object of a session's workspace chain, in the blob store. */
export interface WorkspaceObjectRef {
  key: string;
  size: number;
}

export interface ChainEntry extends WorkspaceObjectRef {
  /** The workspace version this object brings the tree to. */
  version: number;
  /** layer: one commit's changes; snapshot: the whole tree of its version. */
  kind: 'layer' | 'snapshot';
  turnId: string | null;
  /**
   * A rewind's snapshot: the version whose tree it holds (its parts are that version's
   * objects, named again). Absent for compaction's snapshot, the only kind that drops the
   * rows before it.
   */
  rewoundTo?: number;
}

/** What materialises a session's committed workspace: its version, its newest snapshot and the layers after it. */
export interface WorkspaceChain {
  sessionId: string;
  /** The committed workspace version (commits so far); versions whose commit changed nothing have no object. */
  version: number;
  entries: ChainEntry[];
  /**
   * Every object the store still names for the session, older snapshots and the layers
   * after them included (by version, a snapshot's parts in order): the versions whose tree
   * can still be built. Absent = `entries`.
   */
  history?: ChainEntry[];
}

/**
 * A checkpoint of a running turn's work (a `command` job's berth-checkpoint): the files
 * its attempt changed since the previous one, as an object of the blob store. It belongs
 * to the work on the turn's lead message, which a retry (a new turn of the same messages)
 * resumes from; it is not a commit, and goes when that work commits or is given up.
 */
export interface TurnCheckpoint {
  sessionId: string;
  /** The lead (first) message of the turn that made it. */
  messageId: number;
  /** 1, 2, … in that work, across its retries. */
  seq: number;
  /** The checkpoint its object is a delta over; 0 = the committed tree. */
  baseSeq: number;
  /** How many checkpoints of the work its files hold: its base's count + 1 (1 over the committed tree). */
  count: number;
  turnId: string;
  generation: number;
  /** What the job called it ('' for none). */
  label: string;
  /** Its object in the blob store; '' when nothing changed since its base (no object). */
  key: string;
  size: number;
  createdAt: number;
}

/**
 * A completed upstream answer to a model call a turn made, journalled for the work on the
 * turn's lead message: a retry that sends the same request gets it back, unpaid.
 */
export interface JournalledResponse {
  status: number;
  contentType: string;
  /** The body as received (SSE stream bytes or JSON). */
  body: Buffer;
}

export interface CommitInput {
  sessionId: string;
  turnId: string;
  generation: number;
  workerId: string;
  outputs: TurnOutput[];
  /** State written by the turn; null deletes the key. */
  state?: Record<string, unknown>;
  /** Schedules the turn made (schedule_message), with the agent's cap, checked again in the commit. */
  schedules?: { agent: string; cap: number; items: TurnSchedule[] };
  /**
   * The workspace the turn ran on and what it changed: the commit refuses ('workspace_behind')
   * unless `baseVersion` is the session's workspace version, and appends `layer` (already
   * uploaded) to its chain. A resident agent's workspace is written in place, no layer: its
   * commit names the data dir it ran on, which must be the one the store says holds it.
   */
  workspace?:
    | {
        baseVersion: number;
        layer: WorkspaceObjectRef | null;
        /** Files the turn wrote under outbox/, stored as blobs: sent to the session's chat after its replies. */
        outbox?: InboxFile[];
      }
    | { baseVersion: number; residentHolder: string };
}

export interface AbortInput {
  sessionId: string;
  turnId: string;
  generation: number;
  workerId: string;
  /** Why, as a catalogue code: its retryability (and whether it costs a try) decides what becomes of the messages. */
  code: ErrorCode;
  /** The human account of it (entity, state, operation). */
  error: string;
  /** From the sandbox's death (its exit, or its last heartbeat) to this abort: recorded in the event, for the metrics. */
  detectedAfterMs?: number;
}
