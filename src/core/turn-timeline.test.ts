import assert from 'node:assert/strict';
import { test } from 'node:test';
import { turnRow } from '../../test/helpers/turn-row.js';
import { toolProgressText } from './protocol.js';
import { buildTurnTimeline, type ModelCallRecord } from './turn-timeline.js';
import type { Message, MessageStatus, SessionEvent, SessionEventType, Turn } from './types.js';

const BASE = Date.UTC(2026, 0, 1, 12, 0, 0);

const attempt = (n: number, startedAt: number, end: Partial<Turn> = {}): Turn =>
  turnRow({
    id: `turn_${n}`,
    attempt: n,
    generation: n,
    sandbox: `sb${n}`,
    status: 'running',
    startedAt,
    endedAt: null,
    ...end,
  });

/** The record of the newest attempt, its one message in `status`. */
const recordOf = (attempts: Turn[], status: MessageStatus) => ({
  turn: attempts.at(-1)!,
  attempts,
  messages: [{ id: 1, status } as Message],
});

let nextId = 1;
const event = (type: SessionEventType, at: number, data: Record<string, unknown>): SessionEvent => ({
  id: nextId++,
  sessionId: 's1',
  type,
  data,
  createdAt: at,
});
const checkpoint = (turnId: string, at: number, seq: number, bytes = 1229) =>
  event('checkpoint', at, { turnId, seq, count: seq, label: 'model-call', bytes });
const call = (turnId: string, at: number): ModelCallRecord => ({
  turnId,
  at,
  provider: 'anthropic',
  model: 'm',
  inputTokens: 10,
  outputTokens: 5,
});

test('a killed try, then a try that resumes from its last checkpoint and commits', () => {
  const killed = attempt(1, BASE, {
    status: 'aborted',
    endedAt: BASE + 5000,
    errorCode: 'SANDBOX_EXITED',
    error: 'Sandbox exited with 137',
  });
  const resumed = attempt(2, BASE + 6000, { status: 'committed', endedAt: BASE + 9000, baseVersion: 0 });
  const timeline = buildTurnTimeline(recordOf([resumed, killed], 'done'), {
    events: [
      event('started', BASE, { turnId: 'turn_1', attempt: 1 }),
      checkpoint('turn_1', BASE + 100, 1),
      event('progress', BASE + 1100, { turnId: 'turn_1', text: toolProgressText('bash', 'started') }),
      event('progress', BASE + 1400, { turnId: 'turn_1', text: toolProgressText('bash', 'finished', true) }),
      checkpoint('turn_1', BASE + 1500, 2),
      event('progress', BASE + 3000, { turnId: 'turn_1', text: toolProgressText('bash', 'started') }),
      event('retrying', BASE + 5000, { turnId: 'turn_1', code: 'SANDBOX_EXITED', retryInMs: 1000 }),
      event('progress', BASE + 5500, { turnId: 'turn_other', text: 'another turn' }),
      checkpoint('turn_2', BASE + 7000, 3, 0),
      event('progress', BASE + 8000, { turnId: 'turn_2', text: 'writing the answer' }),
      event('reply', BASE + 9000, { turnId: 'turn_2', text: 'done\nall of it' }),
    ],
    modelCalls: [call('turn_1', BASE + 1000), call('turn_1', BASE + 2000), call('turn_2', BASE + 7500)],
    truncated: false,
  });

  assert.equal(timeline.running, false);
  assert.deepEqual(
    timeline.tries.map((t) => [t.attempt, t.status, t.code, t.resumedFrom]),
    [
      [1, 'aborted', 'SANDBOX_EXITED', null],
      [2, 'committed', null, 2],
    ],
  );
  assert.deepEqual(
    timeline.entries.map((e) => [e.at - BASE, e.attempt, e.kind, e.detail]),
    [
      [0, 1, 'try-started', 'try 1 started  (worker w1, sandbox sb1)'],
      [100, 1, 'checkpoint', 'checkpoint 1  (model-call, 1.2 KiB)'],
      [1000, 1, 'model-call', 'model call 1  (checkpoint 1, 1.2 KiB; 10 in / 5 out tokens)'],
      [1100, 1, 'tool-call', 'tool bash  (300 ms, failed)'],
      [1500, 1, 'checkpoint', 'checkpoint 2  (model-call, 1.2 KiB)'],
      [2000, 1, 'model-call', 'model call 2  (checkpoint 2, 1.2 KiB; 10 in / 5 out tokens)'],
      [3000, 1, 'tool-call', 'tool bash'],
      [5000, 1, 'try-ended', 'try 1 aborted SANDBOX_EXITED: Sandbox exited with 137  (retry in 1000 ms)'],
      [6000, 2, 'try-started', 'try 2 started  (worker w1, sandbox sb2)'],
      [
        6000,
        2,
        'resumed',
        'resumed from checkpoint 2  (model-call; 2 earlier model calls journalled, not paid again)',
      ],
      [7000, 2, 'checkpoint', 'checkpoint 3  (model-call, 0 B)'],
      [7500, 2, 'model-call', 'model call 3  (checkpoint 3, 0 B; 10 in / 5 out tokens)'],
      [8000, 2, 'progress', 'writing the answer'],
      [9000, 2, 'reply', 'reply: done all of it'],
      [9000, 2, 'try-ended', 'try 2 committed'],
    ],
  );
  const tool = timeline.entries.find((e) => e.kind === 'tool-call' && e.at === BASE + 3000);
  assert.equal(tool?.endedAt, null, 'a tool the kill cut never returned');
});

test('cases', async (t) => {
  const cases: {
    name: string;
    attempts: Turn[];
    events?: SessionEvent[];
    message?: MessageStatus;
    want: { running: boolean; resumedFrom: (number | null)[]; kinds: string[] };
  }[] = [
    {
      name: 'a try still running: no end, running',
      attempts: [attempt(1, BASE)],
      want: { running: true, resumedFrom: [null], kinds: ['try-started'] },
    },
    {
      name: 'between tries, its message waiting out a backoff: still running',
      attempts: [attempt(1, BASE, { status: 'aborted', endedAt: BASE + 10, errorCode: 'SANDBOX_EXITED' })],
      message: 'pending',
      want: { running: true, resumedFrom: [null], kinds: ['try-started', 'try-ended'] },
    },
    {
      name: 'a try that failed its message for good: over',
      attempts: [attempt(1, BASE, { status: 'aborted', endedAt: BASE + 10, errorCode: 'SANDBOX_EXITED' })],
      message: 'failed',
      want: { running: false, resumedFrom: [null], kinds: ['try-started', 'try-ended'] },
    },
    {
      name: 'a retry with no checkpoint before it starts over: no resume',
      attempts: [
        attempt(1, BASE, { status: 'aborted', endedAt: BASE + 10, errorCode: 'SANDBOX_EXITED' }),
        attempt(2, BASE + 20),
      ],
      want: {
        running: true,
        resumedFrom: [null, null],
        kinds: ['try-started', 'try-ended', 'try-started'],
      },
    },
    {
      name: 'a checkpoint recorded after the retry started is not where it resumed',
      attempts: [
        attempt(1, BASE, { status: 'aborted', endedAt: BASE + 10, errorCode: 'SANDBOX_EXITED' }),
        attempt(2, BASE + 20),
      ],
      events: [checkpoint('turn_2', BASE + 30, 1)],
      want: {
        running: true,
        resumedFrom: [null, null],
        kinds: ['try-started', 'try-ended', 'try-started', 'checkpoint'],
      },
    },
  ];
  for (const c of cases)
    await t.test(c.name, () => {
      const got = buildTurnTimeline(recordOf(c.attempts, c.message ?? 'processing'), {
        events: c.events ?? [],
        modelCalls: [],
        truncated: false,
      });
      assert.deepEqual(
        {
          running: got.running,
          resumedFrom: got.tries.map((x) => x.resumedFrom),
          kinds: got.entries.map((e) => e.kind),
        },
        c.want,
      );
    });
});
