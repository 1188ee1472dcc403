import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { ApiClient, StreamedEvent } from '../client/index.js';
import { driveSession, type RequestRecord } from './session-driver.js';
import { burstSizes, expectedReply, readPlan, startsBurst } from './workload.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const SEED = 1;

/** Drives session s1 for `turns` turns through `client`, with a 300 ms per-message timeout. */
async function drive(client: ApiClient, turns: number) {
  const records: RequestRecord[] = [];
  const unsent = await driveSession(
    {
      client,
      agent: 'a',
      turns,
      seed: SEED,
      messageTimeoutMs: 300,
      abort: new AbortController().signal,
      onRecord: (r) => records.push(r),
    },
    0,
    's1',
  );
  return { unsent, records };
}

/**
 * A berth of one session as the driver sees it through the API: a POST queues a message;
 * whenever the driver waits for an event and none is new, the next thing happens (the
 * running turn ends, else the pending messages are taken together into a new turn), so the
 * order of events follows the driver's reads, never a clock. A turn that took a message
 * `failing` says of ends with a `failed` event for each of its messages; any other commits
 * with one reply per message, naming it.
 */
class FakeBerth {
  readonly events: StreamedEvent[] = [];
  /** Each POST: its message, and whether a turn was running when it came. */
  readonly posts: { messageId: number; turn: number; duringTurn: boolean }[] = [];
  private pending: number[] = [];
  private running: { id: string; messageIds: number[] } | null = null;
  private wake = () => {};

  constructor(private readonly failing: (messageId: number) => boolean = () => false) {}

  client(): ApiClient {
    return {
      request: async (_method: string, _path: string, body: { text: string }) => {
        const messageId = this.posts.length + 1;
        const turn = Number(readPlan(body.text)?.reply?.split(':')[1]);
        this.posts.push({ messageId, turn, duringTurn: this.running !== null });
        this.pending.push(messageId);
        const eventId = this.emit('queued', { messageId });
        this.wake();
        return { message: { id: messageId }, eventId };
      },
      events: (_session: string, after: number, signal: AbortSignal) => this.stream(after, signal),
    } as unknown as ApiClient;
  }

  private async *stream(after: number, signal: AbortSignal): AsyncGenerator<StreamedEvent> {
    for (let read = after; ; ) {
      const next = this.events.find((e) => e.id! > read);
      if (next) {
        read = next.id!;
        yield next;
      } else if (!this.step()) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
          signal.addEventListener('abort', () => resolve(), { once: true });
        });
        if (signal.aborted) throw signal.reason;
      }
    }
  }

  /** The next thing berth does; false when there is nothing to do. */
  private step(): boolean {
    const turn = this.running;
    if (turn) {
      this.running = null;
      for (const messageId of turn.messageIds) {
        if (turn.messageIds.some(this.failing))
          this.emit('failed', { turnId: turn.id, messageId, code: 'STEP_FAILED', error: 'step 0 failed' });
        else
          this.emit('reply', {
            turnId: turn.id,
            messageId: 1000 + messageId,
            inReplyTo: [messageId],
            scope: 'message',
            text: expectedReply('s1', this.posts[messageId - 1]!.turn),
            data: null,
          });
      }
      return true;
    }
    if (this.pending.length === 0) return false;
    this.running = { id: `turn-${this.events.length}`, messageIds: this.pending.splice(0) };
    this.emit('started', { turnId: this.running.id });
    return true;
  }

  private emit(type: string, data: Record<string, unknown>): number {
    const id = this.events.length + 1;
    this.events.push({ id, type, data });
    return id;
  }
}

test('bursts: the rest of each burst is posted while its first message runs, and every message is followed to its own reply', async () => {
  const berth = new FakeBerth();
  const { unsent, records } = await drive(berth.client(), 12);
  assert.equal(unsent, 0);
  const sizes = burstSizes(12, SEED, 0);
  assert.ok(sizes.length > 1 && sizes.every((n) => n >= 2), `bursts ${sizes}`);
  // The first message of each burst comes when nothing runs; each other one while a turn runs.
  assert.deepEqual(
    berth.posts.map((p) => [p.turn, p.duringTurn]),
    berth.posts.map((p) => [p.turn, !startsBurst(p.turn, SEED, 0)]),
  );
  assert.deepEqual(
    records.map((r) => [r.turn, r.messageId, r.outcome, r.replyText, r.reply?.id, r.reply?.scope]),
    records.map((_, i) => [i + 1, i + 1, 'ok', expectedReply('s1', i + 1), 1001 + i, 'message']),
  );
  assert.deepEqual(
    records.map((r) => r.reply?.arrival),
    records.map((_, i) => i + 1),
    'replies are numbered as they arrived',
  );
});

test('bursts: after a message fails, the rest of its burst is still followed to its outcome, and nothing more is sent', async () => {
  const [first, second] = burstSizes(12, SEED, 0);
  // The second burst's first message runs alone; its fail dooms the rest of the burst (taken together, they fail too here).
  const failing = first! + 1;
  const berth = new FakeBerth((id) => id >= failing);
  const { unsent, records } = await drive(berth.client(), 12);
  assert.equal(berth.posts.length, first! + second!, 'the second burst is sent whole, then nothing');
  assert.equal(unsent, 12 - first! - second!);
  assert.deepEqual(
    records.map((r) => [r.turn, r.outcome, r.failedCode]),
    records.map((_, i) => [i + 1, i < first! ? 'ok' : 'fail', i < first! ? null : 'STEP_FAILED']),
  );
});

test('a message berth says nothing more about ends unknown at the per-message timeout, whatever the collector does', {
  timeout: 30_000,
}, async () => {
  // The POST is answered, and the event stream stays open with nothing in it.
  const client = {
    request: async () => ({ message: { id: 1 }, eventId: 0 }),
    events: async function* (_session: string, _after: number, signal: AbortSignal) {
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      yield* [];
    },
  } as unknown as ApiClient;
  const collecting = setInterval(gc, 20);
  let records: RequestRecord[];
  try {
    const driven = await drive(client, 2);
    records = driven.records;
    assert.equal(driven.unsent, 1, 'the rest of the burst is not sent before its first message started');
  } finally {
    clearInterval(collecting);
  }
  assert.deepEqual(
    records.map((r) => [r.outcome, r.reason]),
    [['unknown', 'events: nothing from berth about the message within the per-message timeout']],
  );
});

test('a message queued longer than the per-message timeout, with berth saying where it is, ends ok', async () => {
  const client = {
    request: async () => ({ message: { id: 7 }, eventId: 0 }),
    events: async function* () {
      // Twice the timeout in queue positions, then the reply.
      for (let i = 0; i < 6; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        yield { id: null, type: 'queued', data: { position: 6 - i } };
      }
      yield {
        id: 9,
        type: 'reply',
        data: { messageId: 8, inReplyTo: [7], scope: 'message', text: expectedReply('s1', 1), data: null },
      };
    },
  } as unknown as ApiClient;
  const { records } = await drive(client, 1);
  assert.deepEqual(
    records.map((r) => [r.outcome, r.reason, r.reply?.id]),
    [['ok', '', 8]],
  );
});
