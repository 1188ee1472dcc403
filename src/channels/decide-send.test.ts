import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { PlatformFailure } from './channel.js';
import { type ChannelSendDecision, decideChannelSendFailure } from './decide-send.js';

const BASE = 1_700_000_000_000;
const POLICY = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 };

test('decideChannelSendFailure: a rate limit waits what was asked, a transient failure backs off, a refusal is dead', () => {
  const cases: { name: string; failure: PlatformFailure; attempts: number; want: ChannelSendDecision }[] = [
    {
      name: '429: retry_after, whatever the attempts',
      failure: { kind: 'rate-limited', retryAfterMs: 7000 },
      attempts: 99,
      want: { action: 'wait', nextAttemptAt: BASE + 7000, delayMs: 7000 },
    },
    {
      name: 'transient, first',
      failure: { kind: 'transient', description: 'x' },
      attempts: 1,
      want: { action: 'retry', nextAttemptAt: BASE + 1000, delayMs: 1000 },
    },
    {
      name: 'transient, third',
      failure: { kind: 'transient', description: 'x' },
      attempts: 3,
      want: { action: 'retry', nextAttemptAt: BASE + 4000, delayMs: 4000 },
    },
    {
      name: 'transient, last',
      failure: { kind: 'transient', description: 'x' },
      attempts: 5,
      want: { action: 'dead' },
    },
    {
      name: 'refused',
      failure: { kind: 'refused', status: 403, description: 'bot was blocked' },
      attempts: 1,
      want: { action: 'dead' },
    },
  ];
  for (const c of cases)
    assert.deepEqual(decideChannelSendFailure(c.failure, c.attempts, BASE, POLICY), c.want, c.name);
});
