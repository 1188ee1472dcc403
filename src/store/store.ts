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
  ClaimedSession,
  CommitInput,
  Message,
  Session,
  SessionEvent,
  SessionView,
  StartedTurn,
  Turn,
  WorkerRow,
} from '../core/index.js';

/** Outcome of a fenced transition. */
export type FenceCode = 'ok' | 'stale' | 'not_found';
export type Fenced<T> = { code: 'ok'; value: T } | { code: 'stale' | 'not_found' };

export interface Fence {
  sessionId: string;
  generation: number;
  workerId: string;
}

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
  | { type: 'released'; sessionId: string };

export interface EnqueueInput {
  sessionId: string;
  /** Required when the session does not exist yet; must match when it does. */
  agent?: string;
  text: string;
  now: number;
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres';
  close(): Promise<void>;
  onChange(listener: (change: StoreChange) => void): () => void;

  createAgent(spec: AgentSpec, now: number): Promise<Agent>;
  getAgent(name: string): Promise<Agent | null>;
  listAgents(): Promise<Agent[]>;

  /** Creates the session on first use. Throws AGENT_NOT_FOUND / AGENT_REQUIRED / SESSION_AGENT_MISMATCH. */
  /** eventId is the id of the 'queued' event it wrote: follow the session's events after it. */
  enqueueMessage(input: EnqueueInput): Promise<{ message: Message; view: SessionView; eventId: number }>;

  getSessionView(sessionId: string, now: number): Promise<SessionView | null>;
  listSessionViews(now: number): Promise<SessionView[]>;
  listMessages(sessionId: string, afterId: number, limit: number): Promise<Message[]>;
  listTurns(sessionId: string): Promise<Turn[]>;
  /** Events after `afterId`, for one session or (null) all, oldest first. */
  eventsAfter(sessionId: string | null, afterId: number, limit: number): Promise<SessionEvent[]>;
  listWorkers(): Promise<WorkerRow[]>;

  registerWorker(row: WorkerRow): Promise<void>;
  /** false when the row is gone: the worker must fence itself. */
  renewWorker(workerId: string, now: number): Promise<boolean>;
  removeWorker(workerId: string): Promise<void>;

  /** Sessions whose lease holder's row is older than leaseMs: running turns aborted (with retry policy), lease cleared. */
  reclaimExpiredLeases(now: number): Promise<string[]>;
  /** Compare-and-set of the oldest runnable session to leased(worker, generation+1). */
  claimRunnableSession(workerId: string, now: number): Promise<ClaimedSession | null>;
  /** How many sessions wait in the claim queue now. */
  queueDepth(now: number): Promise<number>;
  /** Earliest future time a pending message becomes runnable, for the wake-up timer. */
  nextProcessAfter(now: number): Promise<number | null>;

  recordSandbox(fence: Fence, sandbox: string, now: number): Promise<FenceCode>;
  /** Takes the session's runnable pending messages into a new running turn; value null when there are none. */
  startTurn(fence: Fence, now: number): Promise<Fenced<StartedTurn | null>>;
  recordProgress(fence: Fence & { turnId: string; text: string }, now: number): Promise<FenceCode>;
  commitTurn(input: CommitInput, now: number): Promise<FenceCode>;
  /** Committed state of a session (key → JSON value). */
  getState(sessionId: string): Promise<Record<string, unknown>>;
  getTurn(turnId: string): Promise<Turn | null>;
  /** The turn's layer is promoted: clears pendingLayer if it still names this turn. Not fenced: any later owner may finish it. */
  markLayerPromoted(sessionId: string, turnId: string): Promise<void>;
  /** Messages of the turn go back to pending with backoff, or are failed after the last try. */
  abortTurn(input: AbortInput, now: number): Promise<FenceCode>;
  /** Gives the session up: lease and sandbox cleared. */
  releaseSession(fence: Fence, now: number): Promise<FenceCode>;

  audit(entry: AuditEntry, now: number): Promise<void>;
  listAudit(afterId: number, limit: number): Promise<(AuditEntry & { id: number; at: number })[]>;
}

export type { Session };
