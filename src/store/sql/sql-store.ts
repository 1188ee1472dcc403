/**
 * The Store, written once for both SQL engines: each method runs one program (programs/,
 * one file per aggregate) in one transaction of a SqlDriver, read-only or write, durable
 * or relaxed. Notifications a program collects reach this process's listeners only after
 * its transaction committed, and other processes through the driver (SQLite: loopback
 * datagrams, PostgreSQL: LISTEN/NOTIFY). A guarded statement that matched no row rolls
 * its transaction back with an INTERNAL error, told to `onWarning` with what it found.
 */
import { EventEmitter } from 'node:events';
import {
  type AbortInput,
  type Agent,
  type AgentSpec,
  type ApiTokenRow,
  type Channel,
  type ChannelFileUse,
  type ChannelInbound,
  type ChannelOutboxItem,
  type ClaimedSession,
  type ClaimQueueEntry,
  type Clock,
  type CommitInput,
  DEFAULT_TENANT,
  decideScheduleRun,
  isBerthError,
  type JournalledResponse,
  type LiveSandbox,
  type LoggedEvent,
  type Message,
  type PageRequest,
  type Principal,
  type RetryPolicy,
  type RewindResult,
  type SandboxRecord,
  type Schedule,
  type ScheduleStatus,
  type SessionCounts,
  type SessionEvent,
  type SessionView,
  type StartedTurn,
  type StorageGrant,
  type StorageOp,
  type StoredObject,
  type Turn,
  type TurnActivity,
  type TurnCheckpoint,
  type TurnRecord,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
  type WorkerRegistration,
  type WorkerRow,
  type WorkspaceChain,
} from '../../core/index.js';
import type {
  AttemptResult,
  AuditEntry,
  CheckpointInput,
  CommitCode,
  CreateSessionInput,
  EnqueueInput,
  Fence,
  FenceCode,
  Fenced,
  ModelResponseInput,
  ModelUsageEntry,
  ModelUsageTotals,
  NewApiToken,
  NewChannel,
  NewSchedule,
  NewWebhook,
  ProgressInput,
  Store,
  StoreChange,
  TakenDelivery,
} from '../store.js';
import type { Program, Tx } from './program.js';
import * as agents from './programs/agents.js';
import * as audits from './programs/audit.js';
import * as channelFiles from './programs/channel-files.js';
import * as channelOutbox from './programs/channel-outbox.js';
import * as channels from './programs/channels.js';
import * as checkpoints from './programs/checkpoints.js';
import * as events from './programs/events.js';
import * as holds from './programs/holds.js';
import * as leases from './programs/leases.js';
import * as usage from './programs/model-usage.js';
import * as sandboxes from './programs/sandboxes.js';
import * as schedules from './programs/schedules.js';
import * as sessions from './programs/sessions.js';
import * as storage from './programs/storage.js';
import * as takeBack from './programs/take-back.js';
import * as tokens from './programs/tokens.js';
import { turnActivity } from './programs/turn-activity.js';
import * as turns from './programs/turns.js';
import * as webhooks from './programs/webhooks.js';
import * as workers from './programs/workers.js';
import * as workspace from './programs/workspace.js';
import { listQueue } from './queue-page.js';
import { listSessionViews, queueDepth, queuePositions, sessionCounts } from './session-views.js';

/** Expired leases one sweep transaction takes over. */
const SWEEP_BATCH = 100;

/** See SqlStore.write. */
export type Durability = 'durable' | 'relaxed';

export interface SqlDriver {
  readonly kind: Store['kind'];
  /** The clock leases are judged by (Store.clock). */
  readonly clock: Clock;
  /**
   * Runs the program in one write transaction (from the start again, with a fresh
   * `changes`, if the engine asks for a retry), tells other processes of its changes, and
   * returns its value and changes once committed.
   */
  write<T>(
    program: (changes: StoreChange[]) => Program<T>,
    durability: Durability,
  ): Promise<{ value: T; changes: StoreChange[] }>;
  /** Runs a read-only program (made anew for each try). */
  read<T>(program: () => Program<T>): Promise<T>;
  /**
   * Runs a worker's lease renewal: a program of idempotent statements, each committed on
   * its own, that never waits behind other calls of this process (a renewal stuck in a
   * queue fences a loaded worker that is alive), tried for at most `budgetMs`: a renewal
   * later than that is worth less than the next one, which carries a fresh time.
   */
  renew<T>(program: () => Program<T>, budgetMs: number): Promise<T>;
  /** Starts delivering other processes' notifications (hints) to `deliver`. */
  listen(deliver: (change: StoreChange) => void): void;
  close(): Promise<void>;
}

export interface SqlStoreOptions {
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
  /** Told of what the store rides out or refuses; here: a transition that found a row in a state its guard rules out (a bug). */
  onWarning?: (message: string, err: unknown) => void;
}

/** A worker renews every lease / 5: a renewal is worth trying until the next one is due. */
const RENEWAL_BUDGET_LEASE_FRACTION = 1 / 5;

export class SqlStore implements Store {
  readonly kind: Store['kind'];
  readonly clock: Clock;
  private readonly emitter = new EventEmitter();
  private readonly policy: { leaseMs: number; retry: RetryPolicy };
  /** staleBefore of this store's last sweep that found nothing due (SWEEP_DUE); -1 = none yet. */
  private sweptUpTo = -1;

  constructor(
    private readonly driver: SqlDriver,
    private readonly options: SqlStoreOptions,
  ) {
    this.kind = driver.kind;
    this.clock = driver.clock;
    this.policy = { leaseMs: options.leaseMs, retry: options.retry };
    this.emitter.setMaxListeners(0);
    driver.listen((change) => this.emitter.emit('change', change));
  }

  close(): Promise<void> {
    return this.driver.close();
  }

  onChange(listener: (change: StoreChange) => void): () => void {
    this.emitter.on('change', listener);
    return () => this.emitter.off('change', listener);
  }

  // ---- agents

  createAgent(spec: AgentSpec, now: number, tenant: string = DEFAULT_TENANT): Promise<Agent> {
    return this.write('createAgent', () => agents.createAgent(spec, now, tenant));
  }

  getAgent(name: string, tenant?: string): Promise<Agent | null> {
    return this.read(() => agents.getAgent(name, tenant));
  }

  listAgents(tenant?: string, page?: PageRequest): Promise<Agent[]> {
    return this.read(() => agents.listAgents(tenant, page));
  }

  replaceAgentSpec(spec: AgentSpec, tenant?: string): Promise<Agent> {
    return this.write('replaceAgentSpec', () => agents.replaceAgentSpec(spec, tenant));
  }

  deleteAgent(name: string, now: number, tenant?: string): Promise<void> {
    return this.write('deleteAgent', () => agents.deleteAgent(name, now, tenant));
  }

  // ---- sessions and what clients see of them

  createSession(input: CreateSessionInput): Promise<SessionView> {
    return this.write('createSession', () => sessions.createSession(input, this.policy.leaseMs));
  }

  archiveSession(sessionId: string, now: number, tenant?: string): Promise<SessionView> {
    return this.write('archiveSession', (tx) =>
      sessions.archiveSession(tx, sessionId, now, tenant, this.policy),
    );
  }

  requestRecycle(sessionId: string, now: number, tenant?: string): Promise<SessionView> {
    return this.write('requestRecycle', () =>
      sessions.requestRecycle(sessionId, now, tenant, this.policy.leaseMs),
    );
  }

  enqueueMessage(input: EnqueueInput): Promise<{ message: Message; view: SessionView; eventId: number }> {
    return this.write('enqueueMessage', (tx) => sessions.enqueueMessage(tx, input, this.policy.leaseMs));
  }

  getSessionView(sessionId: string, now: number, tenant?: string): Promise<SessionView | null> {
    return this.read(() => sessions.getSessionView(sessionId, now, this.policy.leaseMs, tenant));
  }

  listSessionViews(now: number, tenant?: string, page?: PageRequest): Promise<SessionView[]> {
    return this.read(() => listSessionViews(now, this.policy.leaseMs, tenant, page));
  }

  sessionCounts(tenant?: string): Promise<SessionCounts> {
    return this.read(() => sessionCounts(tenant));
  }

  listMessages(sessionId: string, afterId: number, limit: number): Promise<Message[]> {
    return this.read(() => turns.listMessages(sessionId, afterId, limit));
  }

  listTurns(sessionId: string, page?: PageRequest): Promise<Turn[]> {
    return this.read(() => turns.listTurns(sessionId, page));
  }

  getTurnRecord(sessionId: string, turnId: string): Promise<TurnRecord | null> {
    return this.read(() => turns.turnRecord(sessionId, turnId));
  }

  turnActivity(sessionId: string, attempts: Turn[]): Promise<TurnActivity> {
    return this.read(() => turnActivity(sessionId, attempts));
  }

  eventsAfter(
    sessionId: string | null,
    afterId: number,
    limit: number,
    tenant?: string,
  ): Promise<SessionEvent[]> {
    return this.read(() => events.eventsAfter(sessionId, afterId, limit, tenant));
  }

  eventLog(afterId: number, upToId: number, limit: number): Promise<LoggedEvent[]> {
    return this.read(() => events.eventLog(afterId, upToId, limit));
  }

  lastEventId(): Promise<number> {
    return this.read(() => events.lastEventId());
  }

  listQueue(now: number, tenant?: string, page?: PageRequest): Promise<ClaimQueueEntry[]> {
    return this.read(() => listQueue(now, this.policy.leaseMs, tenant, page));
  }

  queuePositions(now: number): Promise<Map<string, number>> {
    return this.read(() => queuePositions(now, this.policy.leaseMs));
  }

  meanTurnMs(limit: number): Promise<number | null> {
    return this.read(() => turns.meanTurnMs(limit));
  }

  // ---- workers and leases

  listWorkers(): Promise<WorkerRow[]> {
    return this.read(() => workers.listWorkers());
  }

  liveSlots(now: number): Promise<number> {
    return this.read(() => workers.liveSlots(now, this.policy.leaseMs));
  }

  registerWorker(row: WorkerRegistration): Promise<void> {
    return this.write('registerWorker', () => workers.registerWorker(row));
  }

  renewWorker(workerId: string, now: number): Promise<boolean> {
    return this.driver.renew(
      () => workers.renewWorker(workerId, now),
      this.policy.leaseMs * RENEWAL_BUDGET_LEASE_FRACTION,
    );
  }

  removeWorker(workerId: string): Promise<void> {
    return this.write('removeWorker', () => workers.removeWorker(workerId));
  }

  drainWorker(workerId: string, now: number): Promise<boolean> {
    return this.write('drainWorker', () => workers.drainWorker(workerId, now));
  }

  getWorker(workerId: string): Promise<WorkerRow | null> {
    return this.read(() => workers.getWorker(workerId));
  }

  async reclaimExpiredLeases(now: number): Promise<string[]> {
    // Every worker sweeps every leaseMs / 5 and nearly every pass finds nothing: a read of the
    // rows stale since this store's last such pass says so, without a write transaction.
    const { leaseMs } = this.policy;
    if (!(await this.read(() => leases.sweepDue(now, leaseMs, this.sweptUpTo)))) {
      this.sweptUpTo = Math.max(this.sweptUpTo, now - leaseMs);
      return [];
    }
    // A batch per transaction: a mass expiry (many workers lost at once) is taken over in
    // short transactions, which other sweepers share (SKIP LOCKED), not one that locks all.
    const reclaimed: string[] = [];
    for (;;) {
      const batch = await this.write('reclaimExpiredLeases', (tx) =>
        leases.reclaimExpiredLeases(tx, now, this.policy, SWEEP_BATCH),
      );
      reclaimed.push(...batch.reclaimed);
      if (!batch.more) return reclaimed;
    }
  }

  claimRunnableSession(workerId: string, now: number): Promise<ClaimedSession | null> {
    return this.write(
      'claimRunnableSession',
      (tx) => leases.claimRunnableSession(tx, workerId, now, this.policy),
      'relaxed',
    );
  }

  queueDepth(now: number): Promise<number> {
    return this.read(() => queueDepth(now, this.policy.leaseMs));
  }

  nextProcessAfter(now: number): Promise<number | null> {
    return this.read(() => leases.nextProcessAfter(now));
  }

  recordSandbox(fence: Fence, sandbox: string, now: number): Promise<FenceCode> {
    return this.write('recordSandbox', (tx) => leases.recordSandbox(tx, fence, sandbox, now), 'relaxed');
  }

  recordResidentHolder(
    input: Fence & { holder: string; holderName: string },
    now: number,
  ): Promise<FenceCode> {
    return this.write('recordResidentHolder', (tx) => holds.recordResidentHolder(tx, input, now));
  }

  recordResidentCapture(
    input: Parameters<Store['recordResidentCapture']>[0],
    now: number,
  ): ReturnType<Store['recordResidentCapture']> {
    return this.write('recordResidentCapture', (tx) => holds.recordResidentCapture(tx, input, now));
  }

  releaseHold(input: {
    sessionId: string;
    resetWorkspace: boolean;
    now: number;
    tenant?: string;
  }): Promise<SessionView> {
    return this.write('releaseHold', (tx) => holds.releaseHold(tx, input, this.policy.leaseMs));
  }

  recordSandboxes(records: SandboxRecord[], now: number): Promise<void> {
    return this.write(
      'recordSandboxes',
      () => sandboxes.recordSandboxes(records, now, this.policy.leaseMs),
      'relaxed',
    );
  }

  listSandboxes(endedSince: number, limit: number, tenant?: string): Promise<SandboxRecord[]> {
    return this.read(() => sandboxes.listSandboxes(endedSince, limit, tenant));
  }

  liveSandboxOf(sessionId: string): Promise<LiveSandbox | null> {
    return this.read(() => sandboxes.liveSandboxOf(sessionId));
  }

  releaseSession(fence: Fence, now: number): Promise<FenceCode> {
    return this.write('releaseSession', (tx) => leases.releaseSession(tx, fence, now), 'relaxed');
  }

  // ---- turns

  startTurn(fence: Fence, now: number): Promise<Fenced<StartedTurn | null>> {
    return this.write('startTurn', (tx) => turns.startTurn(tx, fence, now), 'relaxed');
  }

  recordProgress(input: ProgressInput, now: number): Promise<FenceCode> {
    // A failed step is evidence a checker reads after a crash: it must not ride on a later flush.
    const durability = input.failedStep ? 'durable' : 'relaxed';
    return this.write('recordProgress', (tx) => turns.recordProgress(tx, input, now), durability);
  }

  commitTurn(input: CommitInput, now: number): Promise<CommitCode> {
    return this.write('commitTurn', (tx) => turns.commitTurn(tx, input, now));
  }

  cancelMessage(input: {
    sessionId: string;
    messageId: number;
    now: number;
    tenant?: string;
  }): Promise<Message> {
    return this.write('cancelMessage', (tx) => takeBack.cancelMessage(tx, input));
  }

  requestInterrupt(input: {
    sessionId: string;
    turnId?: string;
    now: number;
    tenant?: string;
  }): Promise<Turn> {
    return this.write('requestInterrupt', (tx) => takeBack.requestInterrupt(tx, input));
  }

  abortTurn(input: AbortInput, now: number): Promise<FenceCode> {
    return this.write('abortTurn', (tx) => turns.abortTurn(tx, input, now, this.policy.retry));
  }

  getState(sessionId: string): Promise<Record<string, unknown>> {
    return this.read(() => turns.getState(sessionId));
  }

  getTurn(turnId: string): Promise<Turn | null> {
    return this.read(() => turns.getTurn(turnId));
  }

  markLayerPromoted(sessionId: string, turnId: string): Promise<void> {
    return this.write('markLayerPromoted', () => turns.markLayerPromoted(sessionId, turnId), 'relaxed');
  }

  // ---- workspace chains

  getWorkspaceChain(sessionId: string): Promise<WorkspaceChain> {
    return this.read(() => workspace.workspaceChain(sessionId));
  }

  recordWorkspaceSnapshot(
    input: { sessionId: string; version: number; key: string; size: number },
    now: number,
  ): Promise<boolean> {
    return this.write('recordWorkspaceSnapshot', () => workspace.recordSnapshot(input, now));
  }

  isWorkspaceObjectNamed(key: string): Promise<boolean> {
    return this.read(() => workspace.isObjectNamed(key));
  }

  // ---- checkpoints of running turns

  recordCheckpoint(input: Fence & CheckpointInput, now: number): Promise<Fenced<TurnCheckpoint>> {
    return this.write('recordCheckpoint', (tx) => checkpoints.recordCheckpoint(tx, input, now));
  }

  listCheckpoints(sessionId: string, messageId: number): Promise<TurnCheckpoint[]> {
    return this.read(() => checkpoints.listCheckpoints(sessionId, messageId));
  }

  sweepCheckpoints(): Promise<string[]> {
    return this.write('sweepCheckpoints', () => checkpoints.sweepCheckpoints(), 'relaxed');
  }

  isCheckpointObjectNamed(key: string): Promise<boolean> {
    return this.read(() => checkpoints.isCheckpointObjectNamed(key));
  }

  channelFileUses(): Promise<ChannelFileUse[]> {
    return this.read(() => channelFiles.channelFileUses());
  }

  journalModelResponse(input: Fence & ModelResponseInput, now: number): Promise<Fenced<void>> {
    return this.write('journalModelResponse', () => checkpoints.journalModelResponse(input, now));
  }

  findModelResponse(
    sessionId: string,
    messageId: number,
    requestHash: string,
  ): Promise<JournalledResponse | null> {
    return this.read(() => checkpoints.findModelResponse(sessionId, messageId, requestHash));
  }

  forkSession(input: {
    sourceId: string;
    sessionId: string;
    fromVersion?: number;
    now: number;
    tenant?: string;
  }): Promise<SessionView> {
    return this.write('forkSession', (tx) => workspace.forkSession(tx, input, this.policy.leaseMs));
  }

  rewindSession(input: Parameters<Store['rewindSession']>[0]): Promise<RewindResult> {
    return this.write('rewindSession', (tx) => workspace.rewindSession(tx, input, this.policy.leaseMs));
  }

  // ---- schedules

  createSchedule(input: NewSchedule, now: number): Promise<Schedule> {
    return this.write('createSchedule', (tx) => schedules.createSchedule(tx, input, now));
  }

  listSchedules(sessionId: string | null, tenant?: string, page?: PageRequest): Promise<Schedule[]> {
    return this.read(() => schedules.listSchedules(sessionId, tenant, page));
  }

  countAgentMadeSchedules(agent: string): Promise<number> {
    return this.read(() => schedules.countAgentMadeSchedules(agent));
  }

  moveScheduleTo(id: string, status: ScheduleStatus, now: number, tenant?: string): Promise<Schedule> {
    return this.write('moveScheduleTo', () => schedules.moveScheduleTo(id, status, now, tenant));
  }

  /** One transaction per due run, so one that fails (audited) does not hold the others back. */
  async runDueSchedules(now: number): Promise<{ fired: string[]; skipped: string[] }> {
    const result = { fired: [] as string[], skipped: [] as string[] };
    for (const s of await this.read(() => schedules.dueSchedules(now))) {
      const decision = decideScheduleRun(s, now);
      if (decision.action === 'wait') continue;
      const outcome = await this.write('runDueSchedules', (tx) =>
        schedules.runDueSchedule(tx, s, decision, now, this.policy.leaseMs),
      );
      if (outcome === 'fired') result.fired.push(s.id);
      if (outcome === 'skipped') result.skipped.push(s.id);
    }
    return result;
  }

  // ---- model usage

  recordModelUsage(entry: ModelUsageEntry, now: number): Promise<void> {
    return this.write('recordModelUsage', () => usage.recordModelUsage(entry, now));
  }

  sumModelUsage(filter: { agent?: string; turnId?: string; since?: number }): Promise<ModelUsageTotals> {
    return this.read(() => usage.sumModelUsage(filter));
  }

  // ---- API tokens

  insertApiToken(token: NewApiToken, now: number): Promise<ApiTokenRow> {
    return this.write('insertApiToken', () => tokens.insertApiToken(token, now));
  }

  principalOfTokenHash(hash: string): Promise<Principal | null> {
    return this.read(() => tokens.principalOfTokenHash(hash));
  }

  listApiTokens(page?: PageRequest): Promise<ApiTokenRow[]> {
    return this.read(() => tokens.listApiTokens(page));
  }

  revokeApiToken(id: string, now: number): Promise<boolean> {
    return this.write('revokeApiToken', () => tokens.revokeApiToken(id, now));
  }

  // ---- webhooks

  // ---- channels

  createChannel(channel: NewChannel, now: number): Promise<Channel> {
    return this.write('createChannel', () => channels.createChannel(channel, now));
  }

  listChannels(tenant?: string, page?: PageRequest): Promise<Channel[]> {
    return this.read(() => channels.listChannels(tenant, page));
  }

  getChannel(id: string, tenant?: string): Promise<Channel | null> {
    return this.read(() => channels.getChannel(id, tenant));
  }

  pauseChannel(id: string, paused: boolean, tenant?: string): Promise<Channel> {
    return this.write('pauseChannel', () => channels.pauseChannel(id, paused, tenant));
  }

  deleteChannel(id: string, now: number, tenant?: string): Promise<boolean> {
    return this.write('deleteChannel', () => channels.deleteChannel(id, now, tenant));
  }

  takeChannelLease(id: string, owner: string, now: number, leaseMs: number): Promise<boolean> {
    return this.write('takeChannelLease', () => channels.takeChannelLease(id, owner, now, leaseMs));
  }

  releaseChannelLease(id: string, owner: string): Promise<void> {
    return this.write('releaseChannelLease', () => channels.releaseChannelLease(id, owner));
  }

  recordChannelError(id: string, error: string | null): Promise<void> {
    return this.write('recordChannelError', () => channels.recordChannelError(id, error));
  }

  commitChannelInbound(
    channelId: string,
    owner: string,
    inbound: ChannelInbound,
    now: number,
  ): Promise<'enqueue' | 'command' | 'refuse' | 'ignore' | 'stale'> {
    return this.write('commitChannelInbound', (tx) =>
      channels.commitChannelInbound(tx, channelId, owner, inbound, now, this.policy.leaseMs),
    );
  }

  commitChannelEvent(
    channelId: string,
    eventId: string,
    inbound: ChannelInbound | null,
    now: number,
  ): Promise<'enqueue' | 'command' | 'refuse' | 'ignore' | 'stale' | 'duplicate'> {
    return this.write('commitChannelEvent', (tx) =>
      channels.commitChannelEvent(tx, channelId, eventId, inbound, now, this.policy.leaseMs),
    );
  }

  recentChannelChats(channelId: string, since: number, limit: number): Promise<string[]> {
    return this.read(() => channels.recentChannelChats(channelId, since, limit));
  }

  channelEventApplied(channelId: string, eventId: string): Promise<boolean> {
    return this.read(() => channels.channelEventApplied(channelId, eventId));
  }

  takeChannelSend(
    channelId: string,
    owner: string,
    now: number,
    leaseMs: number,
  ): Promise<ChannelOutboxItem | null> {
    return this.write('takeChannelSend', () => channelOutbox.takeChannelSend(channelId, owner, now, leaseMs));
  }

  nextChannelSendAt(channelId: string): Promise<number | null> {
    return this.read(() => channelOutbox.nextChannelSendAt(channelId));
  }

  recordChannelPartSent(
    item: Pick<ChannelOutboxItem, 'id' | 'attempts' | 'partsSent' | 'platformMessageIds'>,
    platformMessageId: string,
    done: boolean,
    now: number,
  ): Promise<boolean> {
    return this.write('recordChannelPartSent', () =>
      channelOutbox.recordChannelPartSent(item, platformMessageId, done, now),
    );
  }

  endChannelSendAttempt(
    item: Pick<ChannelOutboxItem, 'id' | 'attempts'>,
    nextAttemptAt: number | null,
    error: string,
    now: number,
  ): Promise<void> {
    return this.write('endChannelSendAttempt', () =>
      channelOutbox.endChannelSendAttempt(item, nextAttemptAt, error, now),
    );
  }

  listChannelOutbox(channelId: string, page?: PageRequest): Promise<ChannelOutboxItem[]> {
    return this.read(() => channelOutbox.listChannelOutbox(channelId, page));
  }

  createWebhook(webhook: NewWebhook, now: number): Promise<Webhook> {
    return this.write('createWebhook', () => webhooks.createWebhook(webhook, now));
  }

  listWebhooks(tenant?: string, page?: PageRequest): Promise<Webhook[]> {
    return this.read(() => webhooks.listWebhooks(tenant, page));
  }

  getWebhook(id: string, tenant?: string): Promise<Webhook | null> {
    return this.read(() => webhooks.getWebhook(id, tenant));
  }

  deleteWebhook(id: string, now: number, tenant?: string): Promise<boolean> {
    return this.write('deleteWebhook', () => webhooks.deleteWebhook(id, now, tenant));
  }

  takeWebhookDelivery(now: number, leaseMs: number): Promise<TakenDelivery | null> {
    return this.write('takeWebhookDelivery', () => webhooks.takeWebhookDelivery(now, leaseMs));
  }

  recordWebhookAttempt(result: AttemptResult, now: number): Promise<void> {
    return this.write('recordWebhookAttempt', () => webhooks.recordWebhookAttempt(result, now));
  }

  listWebhookDeliveries(
    webhookId: string,
    afterId: number,
    limit: number,
  ): Promise<(WebhookDelivery & { log: WebhookAttempt[] })[]> {
    return this.read(() => webhooks.listWebhookDeliveries(webhookId, afterId, limit));
  }

  retryWebhookDelivery(deliveryId: number, now: number, tenant?: string): Promise<boolean> {
    return this.write('retryWebhookDelivery', () => webhooks.retryWebhookDelivery(deliveryId, now, tenant));
  }

  webhookDeliveryCounts(): Promise<Record<'pending' | 'delivered' | 'dead', number>> {
    return this.read(() => webhooks.webhookDeliveryCounts());
  }

  // ---- mediated storage

  grantStorage(
    grant: { agent: string; prefix: string; ops: StorageOp[] },
    now: number,
    tenant?: string,
  ): Promise<StorageGrant> {
    return this.write('grantStorage', () => storage.grantStorage(grant, now, tenant));
  }

  listStorageGrants(agent: string, tenant?: string, page?: PageRequest): Promise<StorageGrant[]> {
    return this.read(() => storage.listStorageGrants(agent, tenant, page));
  }

  revokeStorageGrant(agent: string, prefix: string, tenant?: string): Promise<void> {
    return this.write('revokeStorageGrant', () => storage.revokeStorageGrant(agent, prefix, tenant));
  }

  putStorageObject(
    input: Fence & { key: string; sha256: string; size: number; blob: string },
    now: number,
  ): Promise<Fenced<StoredObject>> {
    return this.write('putStorageObject', () => storage.putStorageObject(input, now));
  }

  deleteStorageObject(input: Fence & { key: string }): Promise<Fenced<boolean>> {
    return this.write('deleteStorageObject', () => storage.deleteStorageObject(input));
  }

  getStorageObject(agent: string, key: string): Promise<StoredObject | null> {
    return this.read(() => storage.getStorageObject(agent, key));
  }

  listStorageObjects(
    agent: string,
    page: { prefix: string; after: string; limit: number },
  ): Promise<StoredObject[]> {
    return this.read(() => storage.listStorageObjects(agent, page));
  }

  isStorageBlobNamed(blob: string): Promise<boolean> {
    return this.read(() => storage.isStorageBlobNamed(blob));
  }

  // ---- audit

  audit(entry: AuditEntry, now: number): Promise<void> {
    return this.write('audit', () => audits.audit(entry, now));
  }

  listAudit(afterId: number, limit: number): Promise<(AuditEntry & { id: number; at: number })[]> {
    return this.read(() => audits.listAudit(afterId, limit));
  }

  private read<T>(program: () => Program<T>): Promise<T> {
    return this.driver.read(program);
  }

  /**
   * One write transaction serving `operation` (the Store method, named in its errors).
   * Notifications go out only after it committed. Durable by default: what a client is
   * told (a message accepted, a turn committed, an agent or token created) is on disk
   * before the call returns. 'relaxed' marks the transitions recovery redoes or undoes on
   * its own (claim, sandbox record, turn start, progress, promotion mark, release,
   * renewal); a driver may let them ride on the next durable commit's flush.
   */
  private async write<T>(
    operation: string,
    program: (tx: Tx) => Program<T>,
    durability: Durability = 'durable',
  ): Promise<T> {
    try {
      const { value, changes } = await this.driver.write(
        (changes) => program({ changes, operation }),
        durability,
      );
      for (const change of changes) this.emitter.emit('change', change);
      return value;
    } catch (err) {
      if (isBerthError(err, 'INTERNAL'))
        this.options.onWarning?.('A store transition found a row in a state its guard rules out', err);
      throw err;
    }
  }
}
