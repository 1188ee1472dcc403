/**
 * Webhooks and their deliveries: a delivery is written with its event (events.ts), taken
 * for one attempt under a lease by a dispatcher, and ended by that attempt alone (fenced
 * by the attempt number); a delivered or dead one may be sent again.
 */
import {
  BerthError,
  BY_CREATION,
  type PageRequest,
  type Webhook,
  type WebhookAttempt,
  type WebhookDelivery,
} from '../../../core/index.js';
import type { AttemptResult, NewWebhook, TakenDelivery } from '../../store.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, run } from '../program.js';
import { toAttempt, toDelivery, toEvent, toWebhook } from '../rows.js';
import { ownAgentRow, ownedBy } from './agents.js';

export function* createWebhook(webhook: NewWebhook, now: number): Program<Webhook> {
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
}

export function* listWebhooks(tenant: string | undefined, page?: PageRequest): Program<Webhook[]> {
  return (yield* all('ALL_WEBHOOKS', { tenant: tenant ?? null, ...pageParams(BY_CREATION, page) })).map(
    toWebhook,
  );
}

export function* getWebhook(id: string, tenant: string | undefined): Program<Webhook | null> {
  const row = yield* get('WEBHOOK_BY_ID', { id });
  return row && ownedBy(row, tenant) ? toWebhook(row) : null;
}

export function* deleteWebhook(id: string, now: number, tenant: string | undefined): Program<boolean> {
  const row = yield* get('WEBHOOK_BY_ID', { id });
  if (!row || !ownedBy(row, tenant)) return false;
  return (yield* run('DELETE_WEBHOOK', { id, now })) === 1;
}

export function* takeWebhookDelivery(now: number, leaseMs: number): Program<TakenDelivery | null> {
  const due = yield* get('DUE_DELIVERY', { now });
  if (!due) return null;
  if ((yield* run('TAKE_DELIVERY', { id: due.id, now, leaseUntil: now + leaseMs })) !== 1) return null;
  const delivery = toDelivery((yield* get('DELIVERY_BY_ID', { id: due.id }))!);
  // Deleted webhooks still get what was owed to them: read without the deleted_at filter.
  const hook = (yield* get('WEBHOOK_EVEN_DELETED', { id: delivery.webhookId }))!;
  const event = toEvent((yield* get('EVENT_BY_ID', { id: delivery.eventId }))!);
  return { delivery, webhook: { ...toWebhook(hook), secret: String(hook.secret) }, event };
}

export function* recordWebhookAttempt(result: AttemptResult, now: number): Program<void> {
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
}

export function* listWebhookDeliveries(
  webhookId: string,
  afterId: number,
  limit: number,
): Program<(WebhookDelivery & { log: WebhookAttempt[] })[]> {
  const out: (WebhookDelivery & { log: WebhookAttempt[] })[] = [];
  for (const r of yield* all('DELIVERIES_OF_WEBHOOK', { webhookId, afterId, limit }))
    out.push({
      ...toDelivery(r),
      log: (yield* all('ATTEMPTS_OF_DELIVERY', { deliveryId: r.id })).map(toAttempt),
    });
  return out;
}

export function* retryWebhookDelivery(
  deliveryId: number,
  now: number,
  tenant: string | undefined,
): Program<boolean> {
  const row = yield* get('DELIVERY_BY_ID', { id: deliveryId });
  if (!row) return false;
  const hook = (yield* get('WEBHOOK_EVEN_DELETED', { id: row.webhook_id }))!;
  if (!ownedBy(hook, tenant)) return false;
  return (yield* run('RETRY_DELIVERY', { id: deliveryId, now })) === 1;
}

export function* webhookDeliveryCounts(): Program<Record<'pending' | 'delivered' | 'dead', number>> {
  const counts = { pending: 0, delivered: 0, dead: 0 };
  for (const r of yield* all('DELIVERY_COUNTS', {})) counts[r.status as keyof typeof counts] = Number(r.n);
  return counts;
}
