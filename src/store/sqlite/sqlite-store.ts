/**
 * SQLite implementation of the Store (better-sqlite3, synchronous, wrapped in the async
 * interface). WAL + busy timeout so several processes can share one file; every write
 * transition runs in a BEGIN IMMEDIATE transaction so two writers never deadlock on a
 * lock upgrade. Notifications are emitted only after the transaction committed.
 */
import { EventEmitter } from 'node:events';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import {
  type AbortInput,
  type Agent,
  type AgentSpec,
  type ApiTokenRow,
  BerthError,
  type ClaimedSession,
  type CommitInput,
  DEFAULT_TENANT,
  decideAbortedMessage,
  type Message,
  newId,
  type Principal,
  type RetryPolicy,
  type SessionEvent,
  type SessionEventType,
  type SessionView,
  type StartedTurn,
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
  NewApiToken,
  NewWebhook,
  Store,
  StoreChange,
  TakenDelivery,
} from '../store.js';
import { ChangeRelay } from './change-relay.js';
import { migrate } from './migrations.js';
import {
  type Row,
  toAgent,
  toApiToken,
  toAttempt,
  toDelivery,
  toEvent,
  toMessage,
  toSession,
  toTurn,
  toWebhook,
  toWorker,
} from './rows.js';
import { queuePositions, sessionViewOf, sessionViewOfRow } from './session-views.js';
import { StatementCache } from './statement-cache.js';
import * as sql from './statements.js';

export interface SqliteStoreOptions {
  path: string;
  /** A lease holder whose worker row is older than this is dead. */
  leaseMs: number;
  /** Applied to the messages of every aborted turn. */
  retry: RetryPolicy;
}

/** Opens (and migrates) the store; a file-backed store also relays its notifications to other processes. */
export function openSqliteStore(options: SqliteStoreOptions): SqliteStore {
  if (options.path !== ':memory:') mkdirSync(dirname(options.path), { recursive: true });
  const db = new Database(options.path);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  // FULL: an accepted (202) message must survive a power cut, not only a process crash.
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  migrate(db);
  const store = new SqliteStore(db, options.leaseMs, options.retry);
  if (options.path !== ':memory:') store.relayAcrossProcesses();
  return store;
}

export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  private readonly emitter = new EventEmitter();
  private relay: ChangeRelay | null = null;
  private readonly q: StatementCache;

  constructor(
    private readonly db: Database.Database,
    private readonly leaseMs: number,
    private readonly retry: RetryPolicy,
  ) {
    this.emitter.setMaxListeners(0);
    this.q = new StatementCache(db);
  }

  async close(): Promise<void> {
    this.relay?.stop();
    this.db.close();
  }

  /** @internal called once by openSqliteStore; starts listening in the background (publishing before that is a no-op). */
  relayAcrossProcesses(): void {
    this.relay = new ChangeRelay(this.db, (change) => this.emitter.emit('change', change));
    this.relay.start();
  }

  onChange(listener: (change: StoreChange) => void): () => void {
    this.emitter.on('change', listener);
    return () => this.emitter.off('change', listener);
  }

  // ---- agents

  async createAgent(spec: AgentSpec, now: number, tenant: string = DEFAULT_TENANT): Promise<Agent> {
    return this.write(() => {
      const params = { name: spec.name, spec: JSON.stringify(spec), tenant, now };
      if (this.q.run(sql.INSERT_AGENT, params).changes !== 1) {
        // Names are global; another tenant's agent is not revealed beyond "taken".
        throw new BerthError('AGENT_EXISTS', `Agent ${spec.name} already exists (createAgent)`);
      }
      return { ...spec, tenant, createdAt: now };
    });
  }

  async getAgent(name: string, tenant?: string): Promise<Agent | null> {
    const row = this.q.get(sql.AGENT_BY_NAME, { name });
    return row && ownedBy(row, tenant) ? toAgent(row) : null;
  }

  async listAgents(tenant?: string): Promise<Agent[]> {
    return this.q.all(sql.ALL_AGENTS, { tenant: tenant ?? null }).map(toAgent);
  }

  async replaceAgentSpec(spec: AgentSpec, tenant?: string): Promise<Agent> {
    return this.write(() => {
      const row = this.ownAgentRow(spec.name, tenant, 'replaceAgentSpec');
      this.q.run(sql.REPLACE_AGENT_SPEC, { name: spec.name, spec: JSON.stringify(spec) });
      return { ...spec, tenant: String(row.tenant), createdAt: Number(row.created_at) };
    });
  }

  async deleteAgent(name: string, now: number, tenant?: string): Promise<void> {
    this.write(() => {
      this.ownAgentRow(name, tenant, 'deleteAgent');
      if (this.q.get(sql.LIVE_SESSION_OF_AGENT, { agent: name })) {
        throw new BerthError(
          'AGENT_IN_USE',
          `Agent ${name} has sessions that are not archived (deleteAgent)`,
        );
      }
      this.q.run(sql.DELETE_AGENT, { name, now });
    });
  }

  // ---- sessions

  async createSession(input: CreateSessionInput): Promise<SessionView> {
    const { sessionId, now } = input;
    return this.write(() => {
      if (this.q.get(sql.SESSION_BY_ID, { id: sessionId })) {
        throw new BerthError('SESSION_EXISTS', `Session ${sessionId} already exists (createSession)`);
      }
      const agent = this.ownAgentRow(input.agent, input.tenant, 'createSession');
      this.q.run(sql.INSERT_SESSION, { id: sessionId, agent: input.agent, tenant: agent.tenant, now });
      return sessionViewOf(this.q, sessionId, now, this.leaseMs)!;
    });
  }

  async archiveSession(sessionId: string, now: number, tenant?: string): Promise<SessionView> {
    return this.write((changes) => {
      const row = this.q.get(sql.SESSION_BY_ID, { id: sessionId });
      if (!row || !ownedBy(row, tenant)) {
        throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (archiveSession)`);
      }
      if (this.q.run(sql.ARCHIVE_SESSION, { id: sessionId, now }).changes === 1) {
        const error = 'session archived';
        const failed = this.q.all(sql.OPEN_INBOUND_OF_SESSION, { sessionId }).map(toMessage);
        for (const m of failed) this.q.run(sql.FAIL_OPEN_MESSAGE, { id: m.id, error });
        const running = this.q.get(sql.RUNNING_TURN_OF_SESSION, { sessionId });
        if (running) this.q.run(sql.END_TURN, { id: running.id, status: 'aborted', error, now });
        this.event(changes, sessionId, 'archived', { failedMessageIds: failed.map((m) => m.id) }, now);
        changes.push({ type: 'released', sessionId });
      }
      return sessionViewOf(this.q, sessionId, now, this.leaseMs)!;
    });
  }

  // ---- inbound

  async enqueueMessage(
    input: EnqueueInput,
  ): Promise<{ message: Message; view: SessionView; eventId: number }> {
    const { sessionId, text, now } = input;
    return this.write((changes) => {
      const existing = this.q.get(sql.SESSION_BY_ID, { id: sessionId });
      if (existing && !ownedBy(existing, input.tenant)) {
        throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist (enqueueMessage)`);
      }
      if (existing?.archived_at != null) {
        throw new BerthError('SESSION_ARCHIVED', `Session ${sessionId} is archived (enqueueMessage)`);
      }
      if (!existing) {
        if (!input.agent) {
          throw new BerthError(
            'AGENT_REQUIRED',
            `Session ${sessionId} does not exist and no agent was named (enqueueMessage)`,
          );
        }
        const agent = this.ownAgentRow(input.agent, input.tenant, 'enqueueMessage');
        this.q.run(sql.INSERT_SESSION, { id: sessionId, agent: input.agent, tenant: agent.tenant, now });
      } else if (input.agent && existing.agent !== input.agent) {
        throw new BerthError(
          'SESSION_AGENT_MISMATCH',
          `Session ${sessionId} belongs to agent ${String(existing.agent)}, not ${input.agent} (enqueueMessage)`,
        );
      }
      const id = Number(this.q.run(sql.INSERT_INBOUND, { sessionId, text, now }).lastInsertRowid);
      const message = toMessage(this.q.get(sql.MESSAGE_BY_ID, { id })!);
      const view = sessionViewOf(this.q, sessionId, now, this.leaseMs)!;
      changes.push({ type: 'enqueued', sessionId, leaseOwner: view.leaseOwner });
      const eventId = this.event(
        changes,
        sessionId,
        'queued',
        { messageId: id, position: view.queuePosition },
        now,
      );
      return { message, view, eventId };
    });
  }

  // ---- reads

  async getSessionView(sessionId: string, now: number, tenant?: string): Promise<SessionView | null> {
    const view = sessionViewOf(this.q, sessionId, now, this.leaseMs);
    return view && (tenant === undefined || view.tenant === tenant) ? view : null;
  }

  async listSessionViews(now: number, tenant?: string): Promise<SessionView[]> {
    const positions = queuePositions(this.q, now, this.leaseMs);
    return this.q
      .all(sql.ALL_SESSIONS, { tenant: tenant ?? null })
      .map((row) => sessionViewOfRow(this.q, row, now, positions));
  }

  async listMessages(sessionId: string, afterId: number, limit: number): Promise<Message[]> {
    return this.q.all(sql.MESSAGES_AFTER, { sessionId, afterId, limit }).map(toMessage);
  }

  async listTurns(sessionId: string): Promise<Turn[]> {
    return this.q.all(sql.TURNS_OF_SESSION, { sessionId }).map(toTurn);
  }

  async eventsAfter(
    sessionId: string | null,
    afterId: number,
    limit: number,
    tenant?: string,
  ): Promise<SessionEvent[]> {
    const rows =
      sessionId === null
        ? this.q.all(sql.EVENTS_AFTER, { afterId, limit, tenant: tenant ?? null })
        : this.q.all(sql.EVENTS_AFTER_OF_SESSION, { sessionId, afterId, limit });
    return rows.map(toEvent);
  }

  async meanTurnMs(limit: number): Promise<number | null> {
    const row = this.q.get(sql.MEAN_TURN_MS, { limit });
    return row?.ms == null ? null : Math.round(Number(row.ms));
  }

  async listWorkers(): Promise<WorkerRow[]> {
    return this.q.all(sql.ALL_WORKERS, {}).map(toWorker);
  }

  // ---- workers and leases

  async registerWorker(row: WorkerRow): Promise<void> {
    this.write(() => this.q.run(sql.UPSERT_WORKER, { ...row }));
  }

  async renewWorker(workerId: string, now: number): Promise<boolean> {
    return this.write(() => this.q.run(sql.RENEW_WORKER, { id: workerId, now }).changes === 1);
  }

  async removeWorker(workerId: string): Promise<void> {
    this.write(() => this.q.run(sql.DELETE_WORKER, { id: workerId }));
  }

  async reclaimExpiredLeases(now: number): Promise<string[]> {
    return this.write((changes) => {
      const ids = this.q
        .all(sql.EXPIRED_LEASES, { staleBefore: now - this.leaseMs })
        .map((r) => String(r.id));
      for (const id of ids) this.reclaimSession(changes, id, now);
      // Their sessions are reclaimed: rows of long-dead workers only clutter `berth status`.
      this.q.run(sql.DELETE_DEAD_WORKERS, { deadBefore: now - 10 * this.leaseMs });
      return ids;
    });
  }

  async claimRunnableSession(workerId: string, now: number): Promise<ClaimedSession | null> {
    return this.write((changes) => {
      const first = this.q.all(sql.QUEUE, { now, staleBefore: now - this.leaseMs })[0];
      if (!first) return null;
      const id = String(first.session_id);
      if (first.lease_owner !== null) this.reclaimSession(changes, id, now);
      const before = this.q.get(sql.SESSION_BY_ID, { id })!;
      const claimed = this.q.run(sql.CLAIM_SESSION, {
        id,
        generation: before.generation,
        worker: workerId,
        now,
      });
      if (claimed.changes !== 1) return null;
      const session = toSession(this.q.get(sql.SESSION_BY_ID, { id })!);
      const agent = toAgent(this.q.get(sql.AGENT_BY_NAME, { name: session.agent })!);
      return { session, agent };
    });
  }

  async queueDepth(now: number): Promise<number> {
    return queuePositions(this.q, now, this.leaseMs).size;
  }

  async nextProcessAfter(now: number): Promise<number | null> {
    const row = this.q.get(sql.NEXT_PROCESS_AFTER, { now });
    return row?.at == null ? null : Number(row.at);
  }

  // ---- fenced transitions

  async recordSandbox(fence: Fence, sandbox: string, now: number): Promise<FenceCode> {
    return this.write(() => {
      const code = this.checkFence(fence);
      if (code !== 'ok') return code;
      this.q.run(sql.RECORD_SANDBOX, { ...fenceParams(fence), sandbox, now });
      return 'ok';
    });
  }

  async startTurn(fence: Fence, now: number): Promise<Fenced<StartedTurn | null>> {
    return this.write((changes) => {
      const code = this.checkFence(fence);
      if (code !== 'ok') return { code };
      const { sessionId } = fence;
      const running = this.q.get(sql.RUNNING_TURN_OF_SESSION, { sessionId });
      if (running)
        return {
          code: 'ok',
          value: { turn: toTurn(running), messages: this.turnMessages(String(running.id)) },
        };
      const runnable = this.q.all(sql.RUNNABLE_OF_SESSION, { sessionId, now }).map(toMessage);
      if (runnable.length === 0) return { code: 'ok', value: null };
      const turnId = newId('turn');
      const attempt = Math.max(...runnable.map((m) => m.tries)) + 1;
      for (const m of runnable) this.q.run(sql.TAKE_MESSAGE, { id: m.id, turnId });
      const session = this.q.get(sql.SESSION_BY_ID, { id: sessionId })!;
      this.q.run(sql.INSERT_TURN, {
        id: turnId,
        sessionId,
        attempt,
        generation: fence.generation,
        worker: fence.workerId,
        sandbox: session.sandbox,
        messageIds: JSON.stringify(runnable.map((m) => m.id)),
        now,
      });
      this.event(changes, sessionId, 'started', { turnId, attempt, generation: fence.generation }, now);
      return {
        code: 'ok',
        value: {
          turn: toTurn(this.q.get(sql.TURN_BY_ID, { id: turnId })!),
          messages: this.turnMessages(turnId),
        },
      };
    });
  }

  async recordProgress(input: Fence & { turnId: string; text: string }, now: number): Promise<FenceCode> {
    return this.write((changes) => {
      const code = this.checkRunningTurn(input, input.turnId);
      if (code !== 'ok') return code;
      this.q.run(sql.SET_TURN_PROGRESS, { id: input.turnId, text: input.text });
      this.event(changes, input.sessionId, 'progress', { turnId: input.turnId, text: input.text }, now);
      return 'ok';
    });
  }

  async commitTurn(input: CommitInput, now: number): Promise<FenceCode> {
    return this.write((changes) => {
      const code = this.checkRunningTurn(input, input.turnId);
      if (code !== 'ok') return code;
      const inReplyTo = this.turnMessages(input.turnId).map((m) => m.id);
      for (const id of inReplyTo) this.q.run(sql.FINISH_MESSAGE, { id });
      for (const [key, value] of Object.entries(input.state ?? {})) {
        if (value === null) this.q.run(sql.DELETE_STATE, { sessionId: input.sessionId, key });
        else
          this.q.run(sql.UPSERT_STATE, {
            sessionId: input.sessionId,
            key,
            value: JSON.stringify(value),
            turnId: input.turnId,
            now,
          });
      }
      this.q.run(sql.SET_PENDING_LAYER, { id: input.sessionId, turnId: input.turnId, now });
      this.q.run(sql.END_TURN, { id: input.turnId, status: 'committed', error: null, now });
      for (const output of input.outputs) {
        const id = Number(
          this.q.run(sql.INSERT_OUTBOUND, {
            sessionId: input.sessionId,
            text: output.text,
            data: output.data === undefined ? null : JSON.stringify(output.data),
            turnId: input.turnId,
            now,
          }).lastInsertRowid,
        );
        this.event(
          changes,
          input.sessionId,
          'reply',
          { turnId: input.turnId, messageId: id, inReplyTo, text: output.text, data: output.data ?? null },
          now,
        );
      }
      return 'ok';
    });
  }

  async abortTurn(input: AbortInput, now: number): Promise<FenceCode> {
    return this.write((changes) => {
      const code = this.checkRunningTurn(input, input.turnId);
      if (code !== 'ok') return code;
      this.abortRunningTurn(
        changes,
        input.sessionId,
        input.turnId,
        input.error,
        now,
        input.countsAsTry ?? true,
        input.terminal ?? false,
      );
      return 'ok';
    });
  }

  async getState(sessionId: string): Promise<Record<string, unknown>> {
    const rows = this.q.all(sql.STATE_OF_SESSION, { sessionId });
    return Object.fromEntries(rows.map((r) => [String(r.key), JSON.parse(String(r.value))]));
  }

  async getTurn(turnId: string): Promise<Turn | null> {
    const row = this.q.get(sql.TURN_BY_ID, { id: turnId });
    return row ? toTurn(row) : null;
  }

  async markLayerPromoted(sessionId: string, turnId: string): Promise<void> {
    this.write(() => this.q.run(sql.CLEAR_PENDING_LAYER, { id: sessionId, turnId }));
  }

  async releaseSession(fence: Fence, now: number): Promise<FenceCode> {
    return this.write((changes) => {
      const code = this.checkFence(fence);
      if (code !== 'ok') return code;
      this.q.run(sql.RELEASE_SESSION, { ...fenceParams(fence), now });
      changes.push({ type: 'released', sessionId: fence.sessionId });
      return 'ok';
    });
  }

  // ---- API tokens

  async insertApiToken(token: NewApiToken, now: number): Promise<ApiTokenRow> {
    return this.write(() => {
      this.q.run(sql.INSERT_API_TOKEN, { ...token, admin: token.tenant === null ? 1 : 0, now });
      return toApiToken(this.q.get(sql.API_TOKEN_BY_HASH, { hash: token.hash })!);
    });
  }

  async principalOfTokenHash(hash: string): Promise<Principal | null> {
    const row = this.q.get(sql.API_TOKEN_BY_HASH, { hash });
    if (!row) return null;
    const { tokenId, tenant, admin } = toApiToken(row);
    return { tokenId, tenant, admin };
  }

  async listApiTokens(): Promise<ApiTokenRow[]> {
    return this.q.all(sql.ALL_API_TOKENS, {}).map(toApiToken);
  }

  async revokeApiToken(id: string, now: number): Promise<boolean> {
    return this.write(() => this.q.run(sql.REVOKE_API_TOKEN, { id, now }).changes === 1);
  }

  // ---- webhooks

  async createWebhook(webhook: NewWebhook, now: number): Promise<Webhook> {
    return this.write(() => {
      if (webhook.agent !== null) this.ownAgentRow(webhook.agent, webhook.tenant, 'createWebhook');
      if (webhook.sessionId !== null) {
        const session = this.q.get(sql.SESSION_BY_ID, { id: webhook.sessionId });
        if (!session || session.tenant !== webhook.tenant) {
          throw new BerthError(
            'SESSION_NOT_FOUND',
            `Session ${webhook.sessionId} does not exist (createWebhook)`,
          );
        }
      }
      this.q.run(sql.INSERT_WEBHOOK, { ...webhook, events: JSON.stringify(webhook.events), now });
      return toWebhook(this.q.get(sql.WEBHOOK_BY_ID, { id: webhook.id })!);
    });
  }

  async listWebhooks(tenant?: string): Promise<Webhook[]> {
    return this.q.all(sql.ALL_WEBHOOKS, { tenant: tenant ?? null }).map(toWebhook);
  }

  async getWebhook(id: string, tenant?: string): Promise<Webhook | null> {
    const row = this.q.get(sql.WEBHOOK_BY_ID, { id });
    return row && ownedBy(row, tenant) ? toWebhook(row) : null;
  }

  async deleteWebhook(id: string, now: number, tenant?: string): Promise<boolean> {
    return this.write(() => {
      const row = this.q.get(sql.WEBHOOK_BY_ID, { id });
      if (!row || !ownedBy(row, tenant)) return false;
      return this.q.run(sql.DELETE_WEBHOOK, { id, now }).changes === 1;
    });
  }

  async takeWebhookDelivery(now: number, leaseMs: number): Promise<TakenDelivery | null> {
    return this.write(() => {
      const due = this.q.get(sql.DUE_DELIVERY, { now });
      if (!due) return null;
      if (this.q.run(sql.TAKE_DELIVERY, { id: due.id, now, leaseUntil: now + leaseMs }).changes !== 1)
        return null;
      const delivery = toDelivery(this.q.get(sql.DELIVERY_BY_ID, { id: due.id })!);
      // Deleted webhooks still get what was owed to them: read without the deleted_at filter.
      const hook = this.q.get(sql.WEBHOOK_EVEN_DELETED, { id: delivery.webhookId })!;
      const event = toEvent(this.q.get(sql.EVENT_BY_ID, { id: delivery.eventId })!);
      return { delivery, webhook: { ...toWebhook(hook), secret: String(hook.secret) }, event };
    });
  }

  async recordWebhookAttempt(result: AttemptResult, now: number): Promise<void> {
    this.write(() => {
      const { deliveryId, attempt, decision } = result;
      const ended = this.q.run(sql.END_ATTEMPT, {
        id: deliveryId,
        attempt,
        status: decision.action === 'retry' ? 'pending' : decision.action,
        nextAttemptAt: decision.action === 'retry' ? decision.nextAttemptAt : now,
        error: result.error,
        deliveredAt: decision.action === 'delivered' ? now : null,
      });
      // A stale attempt (its lease ran out and another took the delivery) is not logged either.
      if (ended.changes !== 1) return;
      this.q.run(sql.INSERT_ATTEMPT, {
        deliveryId,
        attempt,
        now,
        statusCode: result.statusCode,
        error: result.error,
        durationMs: result.durationMs,
      });
    });
  }

  async listWebhookDeliveries(
    webhookId: string,
    afterId: number,
    limit: number,
  ): Promise<(WebhookDelivery & { log: WebhookAttempt[] })[]> {
    return this.q.all(sql.DELIVERIES_OF_WEBHOOK, { webhookId, afterId, limit }).map((r) => ({
      ...toDelivery(r),
      log: this.q.all(sql.ATTEMPTS_OF_DELIVERY, { deliveryId: r.id }).map(toAttempt),
    }));
  }

  async retryWebhookDelivery(deliveryId: number, now: number, tenant?: string): Promise<boolean> {
    return this.write(() => {
      const row = this.q.get(sql.DELIVERY_BY_ID, { id: deliveryId });
      if (!row) return false;
      const hook = this.q.get(sql.WEBHOOK_EVEN_DELETED, { id: row.webhook_id })!;
      if (!ownedBy(hook, tenant)) return false;
      return this.q.run(sql.RETRY_DELIVERY, { id: deliveryId, now }).changes === 1;
    });
  }

  async webhookDeliveryCounts(): Promise<Record<'pending' | 'delivered' | 'dead', number>> {
    const counts = { pending: 0, delivered: 0, dead: 0 };
    for (const r of this.q.all(sql.DELIVERY_COUNTS, {}))
      counts[r.status as keyof typeof counts] = Number(r.n);
    return counts;
  }

  async audit(entry: AuditEntry, now: number): Promise<void> {
    this.write(() =>
      this.q.run(sql.INSERT_AUDIT, {
        now,
        kind: entry.kind,
        sessionId: entry.sessionId ?? null,
        generation: entry.generation ?? null,
        data: JSON.stringify(entry.data),
      }),
    );
  }

  async listAudit(afterId: number, limit: number): Promise<(AuditEntry & { id: number; at: number })[]> {
    return this.q.all(sql.AUDIT_AFTER, { afterId, limit }).map((r) => ({
      id: Number(r.id),
      at: Number(r.at),
      kind: String(r.kind),
      ...(r.session_id == null ? {} : { sessionId: String(r.session_id) }),
      ...(r.generation == null ? {} : { generation: Number(r.generation) }),
      data: JSON.parse(String(r.data)) as Record<string, unknown>,
    }));
  }

  // ---- internals (run inside a write transaction)

  /** The lease holder is dead: its running turn is aborted and the lease cleared, before anyone else binds. */
  private reclaimSession(changes: StoreChange[], sessionId: string, now: number): void {
    const running = this.q.get(sql.RUNNING_TURN_OF_SESSION, { sessionId });
    if (running) this.abortRunningTurn(changes, sessionId, String(running.id), 'worker lease expired', now);
    this.q.run(sql.CLEAR_LEASE, { id: sessionId, now });
    changes.push({ type: 'released', sessionId });
  }

  private abortRunningTurn(
    changes: StoreChange[],
    sessionId: string,
    turnId: string,
    error: string,
    now: number,
    countsAsTry = true,
    terminal = false,
  ): void {
    for (const m of this.turnMessages(turnId)) {
      const decision = decideAbortedMessage(m.tries, now, this.retry, countsAsTry, terminal);
      switch (decision.action) {
        case 'requeue':
          this.q.run(sql.REQUEUE_MESSAGE, { id: m.id, now, error });
          this.event(
            changes,
            sessionId,
            'retrying',
            { turnId, messageId: m.id, tries: m.tries - 1, error, retryInMs: 0 },
            now,
          );
          break;
        case 'retry':
          this.q.run(sql.RETRY_MESSAGE, { id: m.id, processAfter: decision.processAfter, error });
          this.event(
            changes,
            sessionId,
            'retrying',
            { turnId, messageId: m.id, tries: m.tries, error, retryInMs: decision.delayMs },
            now,
          );
          break;
        case 'fail':
          this.q.run(sql.FAIL_MESSAGE, { id: m.id, error });
          this.event(changes, sessionId, 'failed', { turnId, messageId: m.id, tries: m.tries, error }, now);
          break;
      }
    }
    this.q.run(sql.END_TURN, { id: turnId, status: 'aborted', error, now });
  }

  /** The live agent `name` if `tenant` may use it; otherwise AGENT_NOT_FOUND (another tenant's looks absent). */
  private ownAgentRow(name: string, tenant: string | undefined, operation: string): Row {
    const row = this.q.get(sql.AGENT_BY_NAME, { name });
    if (!row || !ownedBy(row, tenant)) {
      throw new BerthError('AGENT_NOT_FOUND', `Agent ${name} does not exist (${operation})`);
    }
    return row;
  }

  private checkFence(fence: Fence): FenceCode {
    if (this.q.get(sql.FENCE, fenceParams(fence))) return 'ok';
    return this.q.get(sql.SESSION_BY_ID, { id: fence.sessionId }) ? 'stale' : 'not_found';
  }

  private checkRunningTurn(fence: Fence, turnId: string): FenceCode {
    const code = this.checkFence(fence);
    if (code !== 'ok') return code;
    const turn = this.q.get(sql.TURN_BY_ID, { id: turnId });
    if (!turn || turn.session_id !== fence.sessionId) return 'not_found';
    if (turn.status !== 'running' || turn.generation !== fence.generation) return 'stale';
    return 'ok';
  }

  private turnMessages(turnId: string): Message[] {
    return this.q.all(sql.PROCESSING_OF_TURN, { turnId }).map(toMessage);
  }

  private event(
    changes: StoreChange[],
    sessionId: string,
    type: SessionEventType,
    data: Record<string, unknown>,
    now: number,
  ): number {
    const id = Number(
      this.q.run(sql.INSERT_EVENT, { sessionId, type, data: JSON.stringify(data), now }).lastInsertRowid,
    );
    this.q.run(sql.INSERT_DELIVERIES_FOR_EVENT, { eventId: id, sessionId, type, now });
    changes.push({ type: 'event', event: { id, sessionId, type, data, createdAt: now } });
    return id;
  }

  /** One BEGIN IMMEDIATE transaction; notifications go out only after it committed. */
  private write<T>(fn: (changes: StoreChange[]) => T): T {
    const changes: StoreChange[] = [];
    const result = this.db.transaction(() => fn(changes)).immediate();
    for (const change of changes) this.emitter.emit('change', change);
    this.relay?.publish(changes);
    return result;
  }
}

/** A row with a tenant column is visible to that tenant and to the operator (tenant undefined). */
function ownedBy(row: Row, tenant: string | undefined): boolean {
  return tenant === undefined || row.tenant === tenant;
}

function fenceParams(f: Fence): Row {
  return { id: f.sessionId, generation: f.generation, worker: f.workerId };
}
