/**
 * Outbound webhooks: records, the signature both sides compute, and the decider that
 * turns one delivery attempt into delivered / retry later / dead letter.
 *
 * Signature: `X-Berth-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>.<body>")>`
 * with `X-Berth-Timestamp: <epoch ms>`; the timestamp inside the MAC lets a receiver
 * refuse replays of old deliveries.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { backoffMs } from './backoff.js';
import type { SessionEvent } from './types.js';

export const WEBHOOK_SIGNATURE_HEADER = 'x-berth-signature';
export const WEBHOOK_TIMESTAMP_HEADER = 'x-berth-timestamp';
export const WEBHOOK_DELIVERY_HEADER = 'x-berth-delivery';

export interface Webhook {
  id: string;
  tenant: string;
  /** Exactly one of agent and sessionId is set: the webhook gets that agent's (or session's) events. */
  agent: string | null;
  sessionId: string | null;
  url: string;
  /** Event types delivered. */
  events: string[];
  createdAt: number;
}

export type DeliveryStatus = 'pending' | 'delivered' | 'dead';

export interface WebhookDelivery {
  id: number;
  webhookId: string;
  eventId: number;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number;
  lastError: string | null;
  createdAt: number;
  deliveredAt: number | null;
}

export interface WebhookAttempt {
  deliveryId: number;
  attempt: number;
  at: number;
  /** HTTP status, or null when no answer came (refused, timeout). */
  statusCode: number | null;
  error: string | null;
  durationMs: number;
}

/** What the receiver gets as the JSON body. */
export interface WebhookPayload {
  deliveryId: number;
  webhookId: string;
  event: SessionEvent;
}

export interface WebhookRetryPolicy {
  retryBaseMs: number;
  retryMaxMs: number;
  /** Attempts before the delivery is a dead letter. */
  maxAttempts: number;
}

export type DeliveryDecision =
  | { action: 'delivered' }
  | { action: 'retry'; nextAttemptAt: number; delayMs: number }
  | { action: 'dead' };

/** After attempt number `attempts` (1-based) that succeeded or not. */
export function decideDelivery(
  attempts: number,
  ok: boolean,
  now: number,
  policy: WebhookRetryPolicy,
): DeliveryDecision {
  if (ok) return { action: 'delivered' };
  if (attempts >= policy.maxAttempts) return { action: 'dead' };
  const delayMs = backoffMs(attempts, { firstMs: policy.retryBaseMs, maxMs: policy.retryMaxMs });
  return { action: 'retry', nextAttemptAt: now + delayMs, delayMs };
}

export function signWebhook(secret: string, timestamp: number, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`;
}

/** For receivers: true when `signature` is what `secret` makes of this timestamp and body. */
export function verifyWebhookSignature(
  secret: string,
  timestamp: number | string,
  body: string,
  signature: string,
): boolean {
  const expected = Buffer.from(signWebhook(secret, Number(timestamp), body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
