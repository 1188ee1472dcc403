/**
 * The Store's transitions, written once for both SQL engines. Each method is one program
 * (see program.ts) that a SqlDriver runs in one transaction; notifications collected by
 * a program reach this process's listeners only after its transaction committed, and
 * other processes through the driver (SQLite: loopback datagrams, PostgreSQL:
 * LISTEN/NOTIFY). Every session-changing program starts by locking the session row
 * (FENCE, QUEUE_HEAD, EXPIRED_LEASES_LOCKED) and re-reads what it decides on after the
 * lock, so PostgreSQL's concurrent transactions decide as SQLite's serial ones do.
 */
import { EventEmitter } from 'node:events';
import {
  type AbortInput,
  type Agent,
  type AgentSpec,
  type ApiTokenRow,
  BerthError,
  type ClaimedSession,
  type Clock,
  type CommitInput,
  DEFAULT_TENANT,
  decideScheduleRun,
  type Message,
  newId,
  nextRunOf,
  type Principal,
  type RetryPolicy,
  type Schedule,
  type ScheduleStatus,
  type SessionEvent,
  type SessionView,
  type StartedTurn,
  type StorageGrant,
  type StorageOp,
  type StoredObject,
  type Turn,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
  type WorkerRow,
} from '../../core/index.js';
import type {
  AttemptResult,
  AuditEntry,
  CreateSessionInput,
  EnqueueInput,
  Fence,
  FenceCode,
  Fenced,
  ModelUsageEntry,
  ModelUsageTotals,
  NewApiToken,
  NewSchedule,
  NewWebhook,
  Store,
  StoreChange,
  TakenDelivery,
} from '../store.js';
import { all, get, type Program, run } from './program.js';
import {
  toAgent,
  toApiToken,
  toAttempt,
  toDelivery,
  toEvent,
  toMessage,
  toSchedule,
  toSession,
  toStorageGrant,
  toStorageObject,
  toTurn,
  toWebhook,
  toWorker,
} from './rows.js';
import { listSessionViews, queuePositions, sessionViewOf } from './session-views.js';
import {
  abortRunningTurn,
  agentOfSession,
  checkEnqueue,
  checkFence,
  checkRunningTurn,
  enqueueInTx,
  fenceParams,
  insertEvent,
  insertTurnSchedules,
  ownAgentRow,
  ownedBy,
  reclaimSession,
  sessionTenantFor,
  turnMessages,
} from './transitions.js';

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
  /** Starts delivering other processes' notifications (hints) to `deliver`. */
  listen(deliver: (change: StoreChange) => void): void;
  close(): Promise<void>;
}

export interface SqlStoreOptions {
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
}

export class SqlStore implements Store {
  readonly kind: Store['kind'];
  readonly clock: Clock;
  private readonly emitter = new EventEmitter();
  private readonly leaseMs: number;
  private readonly retry: RetryPolicy;

  constructor(
    private readonly driver: SqlDriver,
    private readonly options: SqlStoreOptions,
  ) {
    this.kind = driver.kind;
    this.clock = driver.clock;
    this.leaseMs = options.leaseMs;
    this.retry = options.retry;
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

  async createAgent(spec: AgentSpec, now: number, tenant: string = DEFAULT_TENANT): Promise<Agent> {
    await this.write(function* () {
      const params = { name: spec.name, spec: JSON.stringify(spec), tenant, now };
      // Names are global; another tenant's agent is not revealed beyond "taken".
      if ((yield* run('INSERT_AGENT', params)) !== 1)
        throw new BerthError('AGENT_EXISTS', `Agent ${spec.name} already exists (createAgent)`);
    });
    return { ...spec, tenant, createdAt: now };
  }

  async getAgent(name: string, tenant?: string): Promise<Agent | null> {
    const row = await this.driver.read(() => get('AGENT_BY_NAME', { name }));
    return row && ownedBy(row, tenant) ? toAgent(row) : null;
  }

  async listAgents(tenant?: string): Promise<Agent[]> {
    return (await this.driver.read(() => all('ALL_AGENTS', { tenant: tenant ?? null }))).map(toAgent);
  }

  replaceAgentSpec(spec: AgentSpec, tenant?: string): Promise<Agent> {
    return this.write(function* () {
      const row = yield* ownAgentRow(spec.name, tenant, 'replaceAgentSpec');
      yield* run('REPLACE_AGENT_SPEC', { name: spec.name, spec: JSON.stringify(spec) });
      return { ...spec, tenant: String(row.tenant), createdAt: Number(row.created_at) };
    });
  }

  async deleteAgent(name: string, now: number, tenant?: string): Promise<void> {
    await this.write(function* () {
      yield* ownAgentRow(name, tenant, 'deleteAgent');
      if (yield* get('LIVE_SESSION_OF_AGENT', { agent: name }))
        throw new BerthError(
          'AGENT_IN_USE',
          `Agent ${name} has sessions that are not archived (deleteAgent)`,
        );
      yield* run('DELETE_AGENT', { name, now });
      yield* run('DELETE_STORAGE_GRANTS_OF_AGENT', { agent: name });
      yield* run('DELETE_STORAGE_OBJECTS_OF_AGENT', { agent: name });
    });
  }

  // ---- sessions

  createSession(input: CreateSessionInput): Promise<SessionView> {
    const { sessionId, now } = input;
    const leaseMs = this.leaseMs;
    return this.write(function* () {
      if (yield* get('SESSION_BY_ID', { id: sessionId }))
        throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (createSession)`);
      const agent = yield* ownAgentRow(input.agent, input.tenant, 'createSession');
      // A concurrent create of the same id inserts nothing here: SESSION_EXISTS for the loser.
      if (
        (yield* run('INSERT_SESSION', { id: sessionId, agent: input.agent, tenant: agent.tenant, now })) !== 1
      )
        throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (createSession)`);
      return (yield* sessionViewOf(sessionId, now, leaseMs))!;
    });
  }

  archiveSession(sessionId: string, now: number, tenant?: string): Promise<SessionView> {
    const { leaseMs, retry } = this;
    return this.write(function* (changes) {
      const row = yield* get('SESSION_BY_ID', { id: sessionId });
      if (!row || !ownedBy(row, tenant))
        throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (archiveSession)`);
      if ((yield* run('ARCHIVE_SESSION', { id: sessionId, now })) === 1) {
        const error = `Session ${sessionId} was archived (archiveSession)`;
        const failed = (yield* all('OPEN_INBOUND_OF_SESSION', { sessionId })).map(toMessage);
        // The running turn ends through the one abort path (SESSION_ARCHIVED is terminal: its messages fail); then the rest.
        const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
        if (running)
          yield* abortRunningTurn(
            changes,
            { sessionId, turnId: String(running.id), code: 'SESSION_ARCHIVED', error },
            now,
            retry,
          );
        for (const m of failed)
          yield* run('FAIL_OPEN_MESSAGE', { id: m.id, error, errorCode: 'SESSION_ARCHIVED' });
        yield* insertEvent(
          changes,
          sessionId,
          'archived',
          { failedMessageIds: failed.map((m) => m.id) },
          now,
        );
        changes.push({ type: 'released', sessionId });
      }
      return (yield* sessionViewOf(sessionId, now, leaseMs))!;
    });
  }

  requestRecycle(sessionId: string, now: number, tenant?: string): Promise<SessionView> {
    const leaseMs = this.leaseMs;
    return this.write(function* () {
      const row = yield* get('SESSION_BY_ID', { id: sessionId });
      if (!row || !ownedBy(row, tenant))
        throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (requestRecycle)`);
      if ((yield* run('REQUEST_RECYCLE', { id: sessionId, now })) === 0)
        throw new BerthError('SESSION_ARCHIVED', `Session ${sessionId} is archived (requestRecycle)`);
      return (yield* sessionViewOf(sessionId, now, leaseMs))!;
    });
  }

  // ---- inbound

  enqueueMessage(input: EnqueueInput): Promise<{ message: Message; view: SessionView; eventId: number }> {
    const leaseMs = this.leaseMs;
    return this.write((changes) => enqueueInTx(changes, input, leaseMs, 'enqueueMessage'));
  }

  // ---- schedules (issue 7)

  createSchedule(input: NewSchedule, now: number): Promise<Schedule> {
    return this.write(function* () {
      const tenant = yield* sessionTenantFor(input, 'createSchedule');
      const id = newId('sch');
      yield* run('INSERT_SCHEDULE', {
        ...input,
        agent: input.agent ?? null,
        tenant,
        id,
        createdByTurn: null,
        now,
      });
      return toSchedule((yield* get('SCHEDULE_BY_ID', { id }))!);
    });
  }

  async listSchedules(sessionId: string | null, tenant?: string): Promise<Schedule[]> {
    return (await this.driver.read(() => all('SCHEDULES', { sessionId, tenant: tenant ?? null }))).map(
      toSchedule,
    );
  }

  async countAgentMadeSchedules(agent: string): Promise<number> {
    return Number((await this.driver.read(() => get('AGENT_MADE_SCHEDULES', { agent })))!.n);
  }

  moveScheduleTo(id: string, status: ScheduleStatus, now: number, tenant?: string): Promise<Schedule> {
    return this.write(function* () {
      const row = yield* get('SCHEDULE_BY_ID', { id });
      if (!row || !ownedBy(row, tenant))
        throw new BerthError(
          'SCHEDULE_NOT_FOUND',
          `Schedule ${id} does not exist (moveScheduleTo ${status})`,
        );
      const s = toSchedule(row);
      if (s.status === 'cancelled')
        throw new BerthError('SCHEDULE_CANCELLED', `Schedule ${id} is cancelled (moveScheduleTo ${status})`);
      // Resumed: next due after now, so runs that fell while paused are not sent.
      const nextRunAt =
        status === 'active' ? nextRunOf(s.cron, s.tz, now) : status === 'paused' ? s.nextRunAt : null;
      yield* run('MOVE_SCHEDULE', { id, status, nextRunAt, now });
      return toSchedule((yield* get('SCHEDULE_BY_ID', { id }))!);
    });
  }

  async runDueSchedules(now: number): Promise<{ fired: string[]; skipped: string[] }> {
    const result = { fired: [] as string[], skipped: [] as string[] };
    const leaseMs = this.leaseMs;
    for (const row of await this.driver.read(() => all('DUE_SCHEDULES', { now }))) {
      const s = toSchedule(row);
      const decision = decideScheduleRun(s, now);
      if (decision.action === 'wait') continue;
      const outcome = await this.write(function* (changes) {
        // Compare-and-set on the due time: whoever moves it on first handles the run, once.
        const moved = yield* run('ADVANCE_SCHEDULE', {
          id: s.id,
          dueAt: decision.dueAt,
          nextRunAt: decision.nextRunAt,
          fired: decision.action === 'fire' ? 1 : 0,
          now,
        });
        if (moved !== 1) return 'taken';
        if (decision.action === 'skip') return 'skipped';
        const input = {
          sessionId: s.sessionId,
          text: s.message,
          now,
          tenant: s.tenant,
          ...(s.agent ? { agent: s.agent } : {}),
        };
        const failure = yield* checkEnqueue(input, 'runDueSchedules');
        if (failure) {
          // The session was archived or its agent deleted: the schedule moves on and says why.
          yield* run('INSERT_AUDIT', {
            now,
            kind: 'schedule-failed',
            sessionId: s.sessionId,
            generation: null,
            data: JSON.stringify({ scheduleId: s.id, error: failure.message }),
          });
          return 'failed';
        }
        yield* enqueueInTx(changes, input, leaseMs, 'runDueSchedules');
        return 'fired';
      });
      if (outcome === 'fired') result.fired.push(s.id);
      if (outcome === 'skipped') result.skipped.push(s.id);
    }
    return result;
  }

  // ---- model usage (issue 7)

  async recordModelUsage(entry: ModelUsageEntry, now: number): Promise<void> {
    await this.write(() => run('INSERT_MODEL_USAGE', { ...entry, now }));
  }

  async sumModelUsage(filter: {
    agent?: string;
    turnId?: string;
    since?: number;
  }): Promise<ModelUsageTotals> {
    const r = (await this.driver.read(() =>
      get('SUM_MODEL_USAGE', {
        agent: filter.agent ?? null,
        turnId: filter.turnId ?? null,
        since: filter.since ?? null,
      }),
    ))!;
    return {
      calls: Number(r.calls),
      inputTokens: Number(r.input_tokens),
      outputTokens: Number(r.output_tokens),
      turns: Number(r.turns),
    };
  }

  // ---- reads

  async getSessionView(sessionId: string, now: number, tenant?: string): Promise<SessionView | null> {
    const view = await this.driver.read(() => sessionViewOf(sessionId, now, this.leaseMs));
    return view && (tenant === undefined || view.tenant === tenant) ? view : null;
  }

  listSessionViews(now: number, tenant?: string): Promise<SessionView[]> {
    return this.driver.read(() => listSessionViews(now, this.leaseMs, tenant));
  }

  async listMessages(sessionId: string, afterId: number, limit: number): Promise<Message[]> {
    return (await this.driver.read(() => all('MESSAGES_AFTER', { sessionId, afterId, limit }))).map(
      toMessage,
    );
  }

  async listTurns(sessionId: string): Promise<Turn[]> {
    return (await this.driver.read(() => all('TURNS_OF_SESSION', { sessionId }))).map(toTurn);
  }

  async eventsAfter(
    sessionId: string | null,
    afterId: number,
    limit: number,
    tenant?: string,
  ): Promise<SessionEvent[]> {
    const rows = await this.driver.read(() =>
      sessionId === null
        ? all('EVENTS_AFTER', { afterId, limit, tenant: tenant ?? null })
        : all('EVENTS_AFTER_OF_SESSION', { sessionId, afterId, limit }),
    );
    return rows.map(toEvent);
  }

  async meanTurnMs(limit: number): Promise<number | null> {
    const row = await this.driver.read(() => get('MEAN_TURN_MS', { limit }));
    return row?.ms == null ? null : Math.round(Number(row.ms));
  }

  async listWorkers(): Promise<WorkerRow[]> {
    return (await this.driver.read(() => all('ALL_WORKERS', {}))).map(toWorker);
  }

  // ---- workers and leases

  async registerWorker(row: WorkerRow): Promise<void> {
    await this.write(() => run('UPSERT_WORKER', { ...row }));
  }

  async renewWorker(workerId: string, now: number): Promise<boolean> {
    return (await this.write(() => run('RENEW_WORKER', { id: workerId, now }), 'relaxed')) === 1;
  }

  async removeWorker(workerId: string): Promise<void> {
    await this.write(() => run('DELETE_WORKER', { id: workerId }));
  }

  reclaimExpiredLeases(now: number): Promise<string[]> {
    const store = this;
    return this.write(function* (changes) {
      const reclaimed: string[] = [];
      const expired = yield* all('EXPIRED_LEASES_LOCKED', { staleBefore: now - store.leaseMs });
      for (const { id } of expired) {
        if (yield* reclaimSession(changes, String(id), now, store.options)) reclaimed.push(String(id));
      }
      // Their sessions are reclaimed: rows of long-dead workers only clutter `berth status`.
      yield* run('DELETE_DEAD_WORKERS', { deadBefore: now - 10 * store.leaseMs });
      return reclaimed;
    });
  }

  claimRunnableSession(workerId: string, now: number): Promise<ClaimedSession | null> {
    const store = this;
    return this.write(function* (changes) {
      const head = yield* get('QUEUE_HEAD', { now, staleBefore: now - store.leaseMs });
      if (!head) return null;
      const id = String(head.session_id);
      const lease = (yield* get('SESSION_LEASE', { id, staleBefore: now - store.leaseMs }))!;
      // Taken by a live worker since the queue was read (PostgreSQL): not ours to take.
      if (lease.lease_owner !== null && Number(lease.holder_alive) === 1) return null;
      if (lease.lease_owner !== null) yield* reclaimSession(changes, id, now, store.options);
      const generation = Number((yield* get('SESSION_BY_ID', { id }))!.generation);
      if ((yield* run('CLAIM_SESSION', { id, generation, worker: workerId, now })) !== 1) return null;
      const session = toSession((yield* get('SESSION_BY_ID', { id }))!);
      const agent = toAgent((yield* get('AGENT_BY_NAME', { name: session.agent }))!);
      return { session, agent };
    }, 'relaxed');
  }

  async queueDepth(now: number): Promise<number> {
    return (await this.driver.read(() => queuePositions(now, this.leaseMs))).size;
  }

  async nextProcessAfter(now: number): Promise<number | null> {
    const row = await this.driver.read(() => get('NEXT_PROCESS_AFTER', { now }));
    return row?.at == null ? null : Number(row.at);
  }

  // ---- fenced transitions

  recordSandbox(fence: Fence, sandbox: string, now: number): Promise<FenceCode> {
    return this.write(function* () {
      const code = yield* checkFence(fence);
      if (code !== 'ok') return code;
      yield* run('RECORD_SANDBOX', { ...fenceParams(fence), sandbox, now });
      return 'ok';
    }, 'relaxed');
  }

  startTurn(fence: Fence, now: number): Promise<Fenced<StartedTurn | null>> {
    return this.write(function* (changes): Program<Fenced<StartedTurn | null>> {
      const code = yield* checkFence(fence);
      if (code !== 'ok') return { code };
      const { sessionId } = fence;
      const running = yield* get('RUNNING_TURN_OF_SESSION', { sessionId });
      if (running) {
        const messages = yield* turnMessages(String(running.id));
        return { code: 'ok', value: { turn: toTurn(running), messages } };
      }
      const runnable = (yield* all('RUNNABLE_OF_SESSION', { sessionId, now })).map(toMessage);
      if (runnable.length === 0) return { code: 'ok', value: null };
      const turnId = newId('turn');
      const attempt = Math.max(...runnable.map((m) => m.tries)) + 1;
      for (const m of runnable) yield* run('TAKE_MESSAGE', { id: m.id, turnId });
      const session = (yield* get('SESSION_BY_ID', { id: sessionId }))!;
      yield* run('INSERT_TURN', {
        id: turnId,
        sessionId,
        attempt,
        generation: fence.generation,
        worker: fence.workerId,
        sandbox: session.sandbox,
        messageIds: JSON.stringify(runnable.map((m) => m.id)),
        now,
      });
      yield* insertEvent(
        changes,
        sessionId,
        'started',
        { turnId, attempt, generation: fence.generation },
        now,
      );
      const turn = toTurn((yield* get('TURN_BY_ID', { id: turnId }))!);
      return { code: 'ok', value: { turn, messages: yield* turnMessages(turnId) } };
    }, 'relaxed');
  }

  recordProgress(input: Fence & { turnId: string; text: string }, now: number): Promise<FenceCode> {
    return this.write(function* (changes) {
      const code = yield* checkRunningTurn(input, input.turnId);
      if (code !== 'ok') return code;
      yield* run('SET_TURN_PROGRESS', { id: input.turnId, text: input.text });
      yield* insertEvent(
        changes,
        input.sessionId,
        'progress',
        { turnId: input.turnId, text: input.text },
        now,
      );
      return 'ok';
    }, 'relaxed');
  }

  commitTurn(input: CommitInput, now: number): Promise<FenceCode> {
    const { sessionId, turnId } = input;
    return this.write(function* (changes) {
      const code = yield* checkRunningTurn(input, turnId);
      if (code !== 'ok') return code;
      const inReplyTo = (yield* turnMessages(turnId)).map((m) => m.id);
      for (const id of inReplyTo) yield* run('FINISH_MESSAGE', { id });
      for (const [key, value] of Object.entries(input.state ?? {})) {
        if (value === null) yield* run('DELETE_STATE', { sessionId, key });
        else yield* run('UPSERT_STATE', { sessionId, key, value: JSON.stringify(value), turnId, now });
      }
      if (input.schedules?.items.length) yield* insertTurnSchedules(sessionId, turnId, input.schedules, now);
      yield* run('SET_PENDING_LAYER', { id: sessionId, turnId, now });
      yield* run('END_TURN', { id: turnId, status: 'committed', error: null, errorCode: null, now });
      for (const output of input.outputs) {
        const data = output.data === undefined ? null : JSON.stringify(output.data);
        const reply = (yield* get('INSERT_OUTBOUND', { sessionId, text: output.text, data, turnId, now }))!;
        yield* insertEvent(
          changes,
          sessionId,
          'reply',
          { turnId, messageId: Number(reply.id), inReplyTo, text: output.text, data: output.data ?? null },
          now,
        );
      }
      return 'ok';
    });
  }

  abortTurn(input: AbortInput, now: number): Promise<FenceCode> {
    const store = this;
    return this.write(function* (changes) {
      const code = yield* checkRunningTurn(input, input.turnId);
      if (code !== 'ok') return code;
      yield* abortRunningTurn(changes, input, now, store.retry);
      return 'ok';
    });
  }

  async getState(sessionId: string): Promise<Record<string, unknown>> {
    const rows = await this.driver.read(() => all('STATE_OF_SESSION', { sessionId }));
    return Object.fromEntries(rows.map((r) => [String(r.key), JSON.parse(String(r.value))]));
  }

  async getTurn(turnId: string): Promise<Turn | null> {
    const row = await this.driver.read(() => get('TURN_BY_ID', { id: turnId }));
    return row ? toTurn(row) : null;
  }

  async markLayerPromoted(sessionId: string, turnId: string): Promise<void> {
    await this.write(() => run('CLEAR_PENDING_LAYER', { id: sessionId, turnId }), 'relaxed');
  }

  releaseSession(fence: Fence, now: number): Promise<FenceCode> {
    return this.write(function* (changes) {
      const code = yield* checkFence(fence);
      if (code !== 'ok') return code;
      yield* run('RELEASE_SESSION', { ...fenceParams(fence), now });
      changes.push({ type: 'released', sessionId: fence.sessionId });
      return 'ok';
    }, 'relaxed');
  }

  // ---- API tokens

  insertApiToken(token: NewApiToken, now: number): Promise<ApiTokenRow> {
    return this.write(function* () {
      yield* run('INSERT_API_TOKEN', { ...token, admin: token.tenant === null ? 1 : 0, now });
      return toApiToken((yield* get('API_TOKEN_BY_HASH', { hash: token.hash }))!);
    });
  }

  async principalOfTokenHash(hash: string): Promise<Principal | null> {
    const row = await this.driver.read(() => get('API_TOKEN_BY_HASH', { hash }));
    if (!row) return null;
    const { tokenId, tenant, admin } = toApiToken(row);
    return { tokenId, tenant, admin };
  }

  async listApiTokens(): Promise<ApiTokenRow[]> {
    return (await this.driver.read(() => all('ALL_API_TOKENS', {}))).map(toApiToken);
  }

  async revokeApiToken(id: string, now: number): Promise<boolean> {
    return (await this.write(() => run('REVOKE_API_TOKEN', { id, now }))) === 1;
  }

  // ---- webhooks

  createWebhook(webhook: NewWebhook, now: number): Promise<Webhook> {
    return this.write(function* () {
      if (webhook.agent !== null) yield* ownAgentRow(webhook.agent, webhook.tenant, 'createWebhook');
      if (webhook.sessionId !== null) {
        const session = yield* get('SESSION_BY_ID', { id: webhook.sessionId });
        if (!session || session.tenant !== webhook.tenant)
          throw new BerthError(
            'SESSION_NOT_FOUND',
            `Session ${webhook.sessionId} does not exist (createWebhook)`,
          );
      }
      yield* run('INSERT_WEBHOOK', { ...webhook, events: JSON.stringify(webhook.events), now });
      return toWebhook((yield* get('WEBHOOK_BY_ID', { id: webhook.id }))!);
    });
  }

  async listWebhooks(tenant?: string): Promise<Webhook[]> {
    return (await this.driver.read(() => all('ALL_WEBHOOKS', { tenant: tenant ?? null }))).map(toWebhook);
  }

  async getWebhook(id: string, tenant?: string): Promise<Webhook | null> {
    const row = await this.driver.read(() => get('WEBHOOK_BY_ID', { id }));
    return row && ownedBy(row, tenant) ? toWebhook(row) : null;
  }

  deleteWebhook(id: string, now: number, tenant?: string): Promise<boolean> {
    return this.write(function* () {
      const row = yield* get('WEBHOOK_BY_ID', { id });
      if (!row || !ownedBy(row, tenant)) return false;
      return (yield* run('DELETE_WEBHOOK', { id, now })) === 1;
    });
  }

  takeWebhookDelivery(now: number, leaseMs: number): Promise<TakenDelivery | null> {
    return this.write(function* (): Program<TakenDelivery | null> {
      const due = yield* get('DUE_DELIVERY', { now });
      if (!due) return null;
      if ((yield* run('TAKE_DELIVERY', { id: due.id, now, leaseUntil: now + leaseMs })) !== 1) return null;
      const delivery = toDelivery((yield* get('DELIVERY_BY_ID', { id: due.id }))!);
      // Deleted webhooks still get what was owed to them: read without the deleted_at filter.
      const hook = (yield* get('WEBHOOK_EVEN_DELETED', { id: delivery.webhookId }))!;
      const event = toEvent((yield* get('EVENT_BY_ID', { id: delivery.eventId }))!);
      return { delivery, webhook: { ...toWebhook(hook), secret: String(hook.secret) }, event };
    });
  }

  async recordWebhookAttempt(result: AttemptResult, now: number): Promise<void> {
    await this.write(function* () {
      const { deliveryId, attempt, decision } = result;
      const ended = yield* run('END_ATTEMPT', {
        id: deliveryId,
        attempt,
        status: decision.action === 'retry' ? 'pending' : decision.action,
        nextAttemptAt: decision.action === 'retry' ? decision.nextAttemptAt : now,
        error: result.error,
        deliveredAt: decision.action === 'delivered' ? now : null,
      });
      // A stale attempt (its lease ran out and another took the delivery) is not logged either.
      if (ended !== 1) return;
      yield* run('INSERT_ATTEMPT', {
        deliveryId,
        attempt,
        now,
        statusCode: result.statusCode,
        error: result.error,
        durationMs: result.durationMs,
      });
    });
  }

  listWebhookDeliveries(
    webhookId: string,
    afterId: number,
    limit: number,
  ): Promise<(WebhookDelivery & { log: WebhookAttempt[] })[]> {
    return this.driver.read(function* () {
      const out: (WebhookDelivery & { log: WebhookAttempt[] })[] = [];
      for (const r of yield* all('DELIVERIES_OF_WEBHOOK', { webhookId, afterId, limit }))
        out.push({
          ...toDelivery(r),
          log: (yield* all('ATTEMPTS_OF_DELIVERY', { deliveryId: r.id })).map(toAttempt),
        });
      return out;
    });
  }

  retryWebhookDelivery(deliveryId: number, now: number, tenant?: string): Promise<boolean> {
    return this.write(function* () {
      const row = yield* get('DELIVERY_BY_ID', { id: deliveryId });
      if (!row) return false;
      const hook = (yield* get('WEBHOOK_EVEN_DELETED', { id: row.webhook_id }))!;
      if (!ownedBy(hook, tenant)) return false;
      return (yield* run('RETRY_DELIVERY', { id: deliveryId, now })) === 1;
    });
  }

  async webhookDeliveryCounts(): Promise<Record<'pending' | 'delivered' | 'dead', number>> {
    const counts = { pending: 0, delivered: 0, dead: 0 };
    for (const r of await this.driver.read(() => all('DELIVERY_COUNTS', {})))
      counts[r.status as keyof typeof counts] = Number(r.n);
    return counts;
  }

  // ---- mediated storage (issue 7)

  grantStorage(
    grant: { agent: string; prefix: string; ops: StorageOp[] },
    now: number,
    tenant?: string,
  ): Promise<StorageGrant> {
    return this.write(function* () {
      yield* ownAgentRow(grant.agent, tenant, 'grantStorage');
      yield* run('UPSERT_STORAGE_GRANT', { ...grant, ops: grant.ops.join(','), now });
      return toStorageGrant((yield* get('STORAGE_GRANT', grant))!);
    });
  }

  listStorageGrants(agent: string, tenant?: string): Promise<StorageGrant[]> {
    return this.driver.read(function* () {
      yield* ownAgentRow(agent, tenant, 'listStorageGrants');
      return (yield* all('STORAGE_GRANTS_OF_AGENT', { agent })).map(toStorageGrant);
    });
  }

  async revokeStorageGrant(agent: string, prefix: string, tenant?: string): Promise<void> {
    await this.write(function* () {
      yield* ownAgentRow(agent, tenant, 'revokeStorageGrant');
      if ((yield* run('DELETE_STORAGE_GRANT', { agent, prefix })) !== 1)
        throw new BerthError(
          'GRANT_NOT_FOUND',
          `Agent ${agent} has no storage grant for prefix ${JSON.stringify(prefix)} (revokeStorageGrant)`,
        );
    });
  }

  putStorageObject(
    input: Fence & { key: string; sha256: string; size: number; blob: string },
    now: number,
  ): Promise<Fenced<StoredObject>> {
    return this.write(function* (): Program<Fenced<StoredObject>> {
      const code = yield* checkFence(input);
      if (code !== 'ok') return { code };
      const agent = yield* agentOfSession(input.sessionId);
      const { key, sha256, size, blob, sessionId, generation } = input;
      yield* run('UPSERT_STORAGE_OBJECT', { agent, key, sha256, size, blob, sessionId, generation, now });
      return { code: 'ok', value: { key, sha256, size, blob, updatedAt: now } };
    });
  }

  deleteStorageObject(input: Fence & { key: string }): Promise<Fenced<boolean>> {
    return this.write(function* (): Program<Fenced<boolean>> {
      const code = yield* checkFence(input);
      if (code !== 'ok') return { code };
      const agent = yield* agentOfSession(input.sessionId);
      return { code: 'ok', value: (yield* run('DELETE_STORAGE_OBJECT', { agent, key: input.key })) === 1 };
    });
  }

  async getStorageObject(agent: string, key: string): Promise<StoredObject | null> {
    const row = await this.driver.read(() => get('STORAGE_OBJECT', { agent, key }));
    return row ? toStorageObject(row) : null;
  }

  async listStorageObjects(
    agent: string,
    page: { prefix: string; after: string; limit: number },
  ): Promise<StoredObject[]> {
    return (await this.driver.read(() => all('STORAGE_OBJECTS_PAGE', { agent, ...page }))).map(
      toStorageObject,
    );
  }

  async isStorageBlobNamed(blob: string): Promise<boolean> {
    return (await this.driver.read(() => get('STORAGE_BLOB_NAMED', { blob }))) !== undefined;
  }

  async audit(entry: AuditEntry, now: number): Promise<void> {
    await this.write(() =>
      run('INSERT_AUDIT', {
        now,
        kind: entry.kind,
        sessionId: entry.sessionId ?? null,
        generation: entry.generation ?? null,
        data: JSON.stringify(entry.data),
      }),
    );
  }

  async listAudit(afterId: number, limit: number): Promise<(AuditEntry & { id: number; at: number })[]> {
    return (await this.driver.read(() => all('AUDIT_AFTER', { afterId, limit }))).map((r) => ({
      id: Number(r.id),
      at: Number(r.at),
      kind: String(r.kind),
      ...(r.session_id == null ? {} : { sessionId: String(r.session_id) }),
      ...(r.generation == null ? {} : { generation: Number(r.generation) }),
      data: JSON.parse(String(r.data)) as Record<string, unknown>,
    }));
  }

  /**
   * Notifications go out only after the transaction committed. Durable by default: what a
   * client is told (a message accepted, a turn committed, an agent or token created) is on
   * disk before the call returns. 'relaxed' marks the transitions recovery redoes or undoes
   * on its own (claim, sandbox record, turn start, progress, promotion mark, release,
   * renewal); a driver may let them ride on the next durable commit's flush.
   */
  private async write<T>(
    program: (changes: StoreChange[]) => Program<T>,
    durability: Durability = 'durable',
  ): Promise<T> {
    const { value, changes } = await this.driver.write(program, durability);
    for (const change of changes) this.emitter.emit('change', change);
    return value;
  }
}
