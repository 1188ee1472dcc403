/**
 * What a failed send does next, decided from the failure alone: a rate limit waits
 * exactly what the platform asked and never counts against the send (so a burst of 429s
 * loses nothing); a transient failure retries with the one backoff until `maxTries` attempts;
 * a refusal (a chat that blocked the bot, a bad chat id) is a dead letter at once, kept
 * in the outbox with its error.
 */
import { backoffMs, type RetryPolicy } from '../core/index.js';
import type { PlatformFailure } from './channel.js';

export type ChannelSendDecision =
  | { action: 'wait'; nextAttemptAt: number; delayMs: number }
  | { action: 'retry'; nextAttemptAt: number; delayMs: number }
  | { action: 'dead' };

/** @param attempts the attempts made so far, this one included (1-based). */
export function decideChannelSendFailure(
  failure: PlatformFailure,
  attempts: number,
  now: number,
  policy: RetryPolicy,
): ChannelSendDecision {
  switch (failure.kind) {
    case 'rate-limited':
      return { action: 'wait', nextAttemptAt: now + failure.retryAfterMs, delayMs: failure.retryAfterMs };
    case 'refused':
      return { action: 'dead' };
    case 'transient': {
      if (attempts >= policy.maxTries) return { action: 'dead' };
      const delayMs = backoffMs(attempts, { firstMs: policy.retryBaseMs, maxMs: policy.retryMaxMs });
      return { action: 'retry', nextAttemptAt: now + delayMs, delayMs };
    }
  }
}
