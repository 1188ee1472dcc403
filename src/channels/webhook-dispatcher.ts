/**
 * Sends webhook deliveries. Deliveries are written by the store in the same transaction
 * as their event, so nothing is lost between an event and its delivery; this loop takes
 * due ones one at a time (each taken for one attempt, leased for the timeout plus slack),
 * POSTs the signed payload, and records the attempt with the decider's outcome: delivered,
 * retry after backoff, or dead letter after `webhookMaxAttempts`. Several processes may
 * run it on one store: the take is a compare-and-set. Woken by store events in this
 * process; polls every second for the rest (retries coming due, other processes' events).
 */
import type { Logger } from 'pino';
import {
  type Clock,
  decideDelivery,
  type ResolvedConfig,
  signWebhook,
  WakeSignal,
  WEBHOOK_DELIVERY_HEADER,
  WEBHOOK_SIGNATURE_HEADER,
  WEBHOOK_TIMESTAMP_HEADER,
  type WebhookPayload,
} from '../core/index.js';
import type { TakenDelivery, WebhookDispatcherStore } from '../store/index.js';

const POLL_MS = 1_000;
/** Lease beyond the request timeout before a taken delivery is due again (a dispatcher that died mid-attempt). */
const LEASE_SLACK_MS = 5_000;

export interface DeliveryOutcome {
  webhookId: string;
  ok: boolean;
  decision: 'delivered' | 'retry' | 'dead';
  durationMs: number;
}

export class WebhookDispatcher {
  private stopped = false;
  private readonly wakeSignal = new WakeSignal();
  private loop: Promise<void> | null = null;
  private unsubscribe: (() => void) | null = null;

  constructor(
    private readonly deps: {
      store: WebhookDispatcherStore;
      clock: Clock;
      config: ResolvedConfig;
      log: Logger;
      /** Each finished attempt, for metrics. */
      onOutcome?: (o: DeliveryOutcome) => void;
    },
  ) {}

  start(): void {
    this.unsubscribe = this.deps.store.onChange((c) => {
      if (c.type === 'event' || c.type === 'events') this.wake();
    });
    this.loop = this.run();
  }

  wake(): void {
    this.wakeSignal.notify();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    this.wake();
    await this.loop;
  }

  private async run(): Promise<void> {
    const { store, clock, config, log } = this.deps;
    while (!this.stopped) {
      let taken: TakenDelivery | null = null;
      try {
        taken = await store.takeWebhookDelivery(clock.now(), config.webhookTimeoutMs + LEASE_SLACK_MS);
        if (taken) await this.attempt(taken);
      } catch (err) {
        log.error({ err }, 'Webhook dispatch failed');
      }
      if (!taken) await this.wakeSignal.wait(POLL_MS);
    }
  }

  private async attempt({ delivery, webhook, event }: TakenDelivery): Promise<void> {
    const { store, clock, config, log } = this.deps;
    const payload: WebhookPayload = { deliveryId: delivery.id, webhookId: webhook.id, event };
    const body = JSON.stringify(payload);
    const timestamp = clock.now();
    const startedAt = performance.now();
    let statusCode: number | null = null;
    let error: string | null = null;
    try {
      const res = await fetch(webhook.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'berth-webhooks',
          [WEBHOOK_SIGNATURE_HEADER]: signWebhook(webhook.secret, timestamp, body),
          [WEBHOOK_TIMESTAMP_HEADER]: String(timestamp),
          [WEBHOOK_DELIVERY_HEADER]: String(delivery.id),
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(config.webhookTimeoutMs),
      });
      statusCode = res.status;
      await res.body?.cancel();
      if (res.status < 200 || res.status >= 300) error = `receiver answered ${res.status}`;
    } catch (err) {
      error = `no answer: ${(err as Error).cause ? String(((err as Error).cause as Error).message) : (err as Error).message}`;
    }
    const durationMs = Math.round(performance.now() - startedAt);
    const now = clock.now();
    const decision = decideDelivery(delivery.attempts, error === null, now, {
      retryBaseMs: config.webhookRetryBaseMs,
      retryMaxMs: config.webhookRetryMaxMs,
      maxAttempts: config.webhookMaxAttempts,
    });
    await store.recordWebhookAttempt(
      { deliveryId: delivery.id, attempt: delivery.attempts, statusCode, error, durationMs, decision },
      now,
    );
    const fields = {
      deliveryId: delivery.id,
      webhookId: webhook.id,
      attempt: delivery.attempts,
      statusCode,
      error,
    };
    switch (decision.action) {
      case 'delivered':
        log.debug(fields, 'Webhook delivered');
        break;
      case 'retry':
        log.info({ ...fields, retryInMs: decision.delayMs }, 'Webhook delivery failed; retrying');
        break;
      case 'dead':
        log.warn(fields, 'Webhook delivery dead-lettered');
        break;
    }
    this.deps.onOutcome?.({
      webhookId: webhook.id,
      ok: error === null,
      decision: decision.action,
      durationMs,
    });
  }
}
