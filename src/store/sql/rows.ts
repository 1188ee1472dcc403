/** Row → record mappers shared by the SQL stores (snake_case columns, JSON as TEXT, integers as numbers). */
import {
  type Agent,
  type AgentSpec,
  type ApiTokenRow,
  type ErrorCode,
  isErrorCode,
  type Message,
  type SandboxEndReason,
  type SandboxPhase,
  type SandboxRecord,
  type Schedule,
  type Session,
  type SessionEvent,
  type SessionEventType,
  type StorageGrant,
  type StorageOp,
  type StoredObject,
  type Turn,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
  type WorkerRow,
} from '../../core/index.js';

import type { QueuedSession, Shares } from './fair-order.js';
import type { Row } from './program.js';

function parseJson(value: unknown): unknown {
  return typeof value === 'string' ? JSON.parse(value) : null;
}

export function toAgent(r: Row): Agent {
  return {
    ...(JSON.parse(String(r.spec)) as AgentSpec),
    tenant: String(r.tenant),
    createdAt: Number(r.created_at),
  };
}

export function toSession(r: Row): Session {
  return {
    id: String(r.id),
    agent: String(r.agent),
    generation: Number(r.generation),
    leaseOwner: (r.lease_owner as string | null) ?? null,
    sandbox: (r.sandbox as string | null) ?? null,
    workspaceVersion: Number(r.workspace_version),
    pendingLayer: (r.pending_layer as string | null) ?? null,
    tenant: String(r.tenant),
    archivedAt: r.archived_at == null ? null : Number(r.archived_at),
    recycleRequestedAt: r.recycle_requested_at == null ? null : Number(r.recycle_requested_at),
    resident: {
      holder: (r.resident_holder as string | null) ?? null,
      holderName: (r.resident_holder_name as string | null) ?? null,
      writtenAt: r.resident_written_at == null ? null : Number(r.resident_written_at),
      capturedVersion: r.resident_captured_version == null ? null : Number(r.resident_captured_version),
      capturedAt: r.resident_captured_at == null ? null : Number(r.resident_captured_at),
      epoch: Number(r.resident_epoch ?? 0),
    },
    hold:
      r.held_at == null
        ? null
        : {
            code: errorCodeOf(r.held_code) ?? 'INTERNAL',
            message: String(r.held_error),
            since: Number(r.held_at),
          },
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export function toMessage(r: Row): Message {
  return {
    id: Number(r.id),
    sessionId: String(r.session_id),
    direction: r.direction as Message['direction'],
    text: String(r.text),
    data: parseJson(r.data),
    status: r.status as Message['status'],
    tries: Number(r.tries),
    processAfter: Number(r.process_after),
    turnId: (r.turn_id as string | null) ?? null,
    inReplyTo: r.in_reply_to == null ? null : (JSON.parse(String(r.in_reply_to)) as number[]),
    error: (r.error as string | null) ?? null,
    errorCode: errorCodeOf(r.error_code),
    createdAt: Number(r.created_at),
  };
}

export function toTurn(r: Row): Turn {
  return {
    id: String(r.id),
    sessionId: String(r.session_id),
    attempt: Number(r.attempt),
    generation: Number(r.generation),
    workerId: String(r.worker_id),
    sandbox: (r.sandbox as string | null) ?? null,
    status: r.status as Turn['status'],
    progress: (r.progress as string | null) ?? null,
    error: (r.error as string | null) ?? null,
    errorCode: errorCodeOf(r.error_code),
    baseVersion: r.base_version == null ? null : Number(r.base_version),
    interruptRequestedAt: r.interrupt_requested_at == null ? null : Number(r.interrupt_requested_at),
    messageIds: JSON.parse(String(r.message_ids)) as number[],
    startedAt: Number(r.started_at),
    endedAt: r.ended_at == null ? null : Number(r.ended_at),
  };
}

export function toEvent(r: Row): SessionEvent {
  return {
    id: Number(r.id),
    sessionId: String(r.session_id),
    type: r.type as SessionEventType,
    data: JSON.parse(String(r.data)) as Record<string, unknown>,
    createdAt: Number(r.created_at),
  };
}

export function toWorker(r: Row): WorkerRow {
  return {
    id: String(r.id),
    host: String(r.host),
    pid: Number(r.pid),
    slots: Number(r.slots),
    heartbeatAt: Number(r.heartbeat_at),
    startedAt: Number(r.started_at),
    drainingSince: r.draining_since == null ? null : Number(r.draining_since),
  };
}

export function toApiToken(r: Row): ApiTokenRow {
  return {
    tokenId: String(r.id),
    tenant: (r.tenant as string | null) ?? null,
    admin: Number(r.admin) === 1,
    label: String(r.label),
    createdAt: Number(r.created_at),
    revokedAt: r.revoked_at == null ? null : Number(r.revoked_at),
  };
}

export function toWebhook(r: Row): Webhook {
  return {
    id: String(r.id),
    tenant: String(r.tenant),
    agent: (r.agent as string | null) ?? null,
    sessionId: (r.session_id as string | null) ?? null,
    url: String(r.url),
    events: JSON.parse(String(r.events)) as string[],
    createdAt: Number(r.created_at),
  };
}

export function toDelivery(r: Row): WebhookDelivery {
  return {
    id: Number(r.id),
    webhookId: String(r.webhook_id),
    eventId: Number(r.event_id),
    status: r.status as WebhookDelivery['status'],
    attempts: Number(r.attempts),
    nextAttemptAt: Number(r.next_attempt_at),
    lastError: (r.last_error as string | null) ?? null,
    createdAt: Number(r.created_at),
    deliveredAt: r.delivered_at == null ? null : Number(r.delivered_at),
  };
}

export function toAttempt(r: Row): WebhookAttempt {
  return {
    deliveryId: Number(r.delivery_id),
    attempt: Number(r.attempt),
    at: Number(r.at),
    statusCode: r.status_code == null ? null : Number(r.status_code),
    error: (r.error as string | null) ?? null,
    durationMs: Number(r.duration_ms),
  };
}

export function toSchedule(r: Row): Schedule {
  const n = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    id: String(r.id),
    sessionId: String(r.session_id),
    agent: (r.agent as string | null) ?? null,
    tenant: String(r.tenant),
    cron: String(r.cron),
    tz: String(r.tz),
    message: String(r.message),
    missed: r.missed as Schedule['missed'],
    status: r.status as Schedule['status'],
    nextRunAt: n(r.next_run_at),
    lastRunAt: n(r.last_run_at),
    runs: Number(r.runs),
    createdByTurn: (r.created_by_turn as string | null) ?? null,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
  };
}

export function toStorageGrant(r: Row): StorageGrant {
  return {
    agent: String(r.agent),
    prefix: String(r.prefix),
    ops: String(r.ops).split(',') as StorageOp[],
    createdAt: Number(r.created_at),
  };
}

export function toStorageObject(r: Row): StoredObject {
  return {
    blob: String(r.blob),
    key: String(r.key),
    sha256: String(r.sha256),
    size: Number(r.size),
    updatedAt: Number(r.updated_at),
  };
}

/** A stored code the catalogue no longer has (a newer berth wrote it) reads as INTERNAL, never as a string out of the union. */
function errorCodeOf(value: unknown): ErrorCode | null {
  if (value === null || value === undefined) return null;
  return isErrorCode(value) ? value : 'INTERNAL';
}

export function toSandboxRecord(r: Row): SandboxRecord {
  const orNull = (v: unknown) => (v == null ? null : Number(v));
  return {
    name: String(r.name),
    workerId: String(r.worker_id),
    phase: String(r.phase) as SandboxPhase,
    pooled: Number(r.pooled) === 1,
    sessionId: r.session_id == null ? null : String(r.session_id),
    generation: orNull(r.generation),
    turnId: r.turn_id == null ? null : String(r.turn_id),
    endReason: r.end_reason == null ? null : (String(r.end_reason) as SandboxEndReason),
    endMessage: r.end_message == null ? null : String(r.end_message),
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    endedAt: orNull(r.ended_at),
  };
}

/** TENANT_SHARES rows (virtual_time is null while there are none). */
export function toShares(rows: Row[]): Shares {
  return {
    byTenant: new Map(
      rows.map((r) => [String(r.tenant), { weight: Number(r.weight), pass: Number(r.pass) }]),
    ),
    virtualTime: Number(rows[0]?.virtual_time ?? 0),
  };
}

/** A FREE_QUEUE or DEAD_HELD_QUEUE row. */
export function toQueuedSession(row: Row): QueuedSession {
  return { sessionId: String(row.session_id), firstId: Number(row.first_id), tenant: String(row.tenant) };
}
