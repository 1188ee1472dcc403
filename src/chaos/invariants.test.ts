/**
 * The checker's store-and-client invariants on constructed sessions, no Docker: the reply
 * invariants (order, attribution, outcomes), the committed workspace on disk, and the
 * excuse of a message sent after an earlier one failed. Each check is shown failing on the
 * bad input it exists for.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { messageRow } from '../../test/helpers/message-row.js';
import { turnRow } from '../../test/helpers/turn-row.js';
import type { ErrorCode, Message, SessionEvent, Turn } from '../core/index.js';
import { workspaceLayout } from '../workspace/index.js';
import { excusedMessages } from './excuses.js';
import type { InvariantResult } from './invariant-result.js';
import { committedDirOf, committedWorkspace, failedSteps } from './invariants.js';
import { checkReplies } from './reply-invariants.js';
import type { RequestRecord } from './session-driver.js';
import type { SessionSnapshot } from './snapshot.js';
import { expectedLog, expectedReply, LOG_FILE, STATE_KEY, turnPlan } from './workload.js';

const S = 's1';
const SEED = 3;

/** One session's store rows, written in the order berth writes them: each method one transition. */
class History {
  readonly messages: Message[] = [];
  readonly turns: Turn[] = [];
  readonly events: SessionEvent[] = [];
  /** The workload turn of each inbound message. */
  private readonly turnOf = new Map<number, number>();

  constructor(private nextId = 1) {}

  /** Inbound message for workload turn `turn`; its id. */
  accept(turn: number): number {
    const id = this.nextId++;
    this.turnOf.set(id, turn);
    this.messages.push(message(id, 'in', JSON.stringify(turnPlan(0, turn, { session: S, seed: SEED }))));
    return id;
  }

  start(turnId: string, messageIds: number[]): void {
    this.turns.push(turnRow({ id: turnId, status: 'running', messageIds }));
    for (const id of messageIds) Object.assign(this.inbound(id), { status: 'processing', turnId });
    this.emit('started', { turnId });
  }

  /** Commits the turn; by default each message gets its own reply, as the script provider gives it. */
  commit(
    turnId: string,
    outputs = this.turn(turnId).messageIds.map((id) => ({
      text: expectedReply(S, this.turnOf.get(id)!),
      inReplyTo: [id],
      scope: 'message',
    })),
  ): void {
    this.turn(turnId).status = 'committed';
    for (const id of this.turn(turnId).messageIds) this.inbound(id).status = 'done';
    for (const o of outputs) {
      const reply = { ...message(this.nextId++, 'out', o.text), turnId, inReplyTo: o.inReplyTo };
      this.messages.push(reply);
      this.emit('reply', {
        turnId,
        messageId: reply.id,
        inReplyTo: o.inReplyTo,
        scope: o.scope,
        text: o.text,
      });
    }
  }

  /** Aborts the turn: its messages retried (`failed` false) or failed for good with `code`. */
  abort(turnId: string, code: ErrorCode, failed: boolean): void {
    Object.assign(this.turn(turnId), { status: 'aborted', errorCode: code });
    for (const messageId of this.turn(turnId).messageIds) {
      Object.assign(
        this.inbound(messageId),
        failed ? { status: 'failed', errorCode: code } : { status: 'pending' },
      );
      this.emit(failed ? 'failed' : 'retrying', { turnId, messageId, code });
    }
  }

  /** The turn reports a failed step of one of its messages, as the runner does before it aborts. */
  failStep(turnId: string, messageId: number, index: number): void {
    this.emit('progress', { turnId, failedStep: { messageId, index, kind: 'x' } });
  }

  snapshot(): SessionSnapshot {
    const { messages, turns, events } = this;
    return {
      id: S,
      view: null,
      messages,
      turns,
      state: {},
      events,
      chain: { sessionId: S, version: 0, entries: [] },
    };
  }

  private turn(id: string): Turn {
    return this.turns.find((t) => t.id === id)!;
  }

  private inbound(id: number): Message {
    return this.messages.find((m) => m.id === id && m.direction === 'in')!;
  }

  private emit(type: SessionEvent['type'], data: Record<string, unknown>): void {
    this.events.push({ id: this.events.length + 1, sessionId: S, type, data, createdAt: 0 });
  }
}

function message(id: number, direction: 'in' | 'out', text: string): Message {
  return messageRow({ id, sessionId: S, direction, text, status: direction === 'in' ? 'pending' : 'done' });
}

/** A client's record of its request, ok by default: it took the reply with id `reply`, the `arrival`-th it received. */
function record(
  turn: number,
  messageId: number,
  got: Partial<RequestRecord> & { replyId?: number; arrival?: number } = {},
): RequestRecord {
  const { replyId, arrival, ...fields } = got;
  return {
    session: S,
    turn,
    messageId,
    outcome: 'ok',
    reason: '',
    retriesSeen: 0,
    eventsSeen: 0,
    lastEvent: null,
    sentAt: 0,
    endedAt: 0,
    replyText: expectedReply(S, turn),
    reply:
      replyId === undefined
        ? null
        : { id: replyId, inReplyTo: [messageId], scope: 'message', data: null, arrival: arrival ?? turn },
    failedCode: null,
    ...fields,
  };
}

const named = (results: InvariantResult[], name: string) => results.find((r) => r.name === name)!;

/** The ok records of every message of the history that the store answered: each took the reply naming it, in order. */
function clientOf(h: History): RequestRecord[] {
  const replies = h.messages.filter((m) => m.direction === 'out');
  return replies.map((r, i) => {
    const messageId = r.inReplyTo![0]!;
    const turn = h.messages.filter((m) => m.direction === 'in').findIndex((m) => m.id === messageId) + 1;
    return record(turn, messageId, { replyId: r.id, arrival: i + 1 });
  });
}

test('a message alone, then two taken by one turn, each answered by its own reply: every reply invariant holds', () => {
  const h = new History();
  const m1 = h.accept(1);
  h.start('t1', [m1]);
  const [m2, m3] = [h.accept(2), h.accept(3)];
  h.commit('t1');
  h.start('t2', [m2, m3]);
  h.commit('t2');
  const results = checkReplies([h.snapshot()], clientOf(h));
  assert.deepEqual(
    results.map((r) => [r.name, r.details]),
    [
      ['replies-in-order', []],
      ['reply-attribution', []],
      ['outcomes-agree', []],
    ],
  );
});

test('reply-attribution: two messages in one turn whose replies each name both fails, in the store and for the client that took the first', () => {
  const h = new History();
  const [m1, m2] = [h.accept(1), h.accept(2)];
  h.start('t1', [m1, m2]);
  // Each output answering the whole turn: the first reply naming message 2 is message 1's.
  h.commit('t1', [
    { text: expectedReply(S, 1), inReplyTo: [m1, m2], scope: 'turn' },
    { text: expectedReply(S, 2), inReplyTo: [m1, m2], scope: 'turn' },
  ]);
  const [r1] = h.messages.filter((m) => m.direction === 'out');
  const requests = [
    record(1, m1, { replyId: r1!.id, arrival: 1 }),
    record(2, m2, { replyId: r1!.id, arrival: 1, replyText: r1!.text }),
  ];
  const attribution = named(checkReplies([h.snapshot()], requests), 'reply-attribution');
  assert.equal(attribution.passed, false);
  assert.deepEqual(attribution.details, [
    `${S}: reply 3 is "${S}:1" but names message 2, whose reply is "${S}:2"`,
    `${S}: reply 4 is "${S}:2" but names message 1, whose reply is "${S}:1"`,
    `${S} turn 2: the reply the client took for message 2 is "${S}:1", expected "${S}:2"`,
  ]);
});

test('reply-attribution: a message-scoped reply that names two messages, or one its turn did not take, fails it', () => {
  const h = new History();
  const [m1, m2] = [h.accept(1), h.accept(2)];
  h.start('t1', [m1]);
  h.commit('t1', [{ text: expectedReply(S, 1), inReplyTo: [m1, m2], scope: 'message' }]);
  // The client took it for message 1, as it names it.
  const took = record(1, m1, { replyId: 3 });
  took.reply!.inReplyTo = [m1, m2];
  const attribution = named(checkReplies([h.snapshot()], [took]), 'reply-attribution');
  assert.deepEqual(attribution.details, [
    `${S}: reply 3 answers one message but names [1,2]`,
    `${S}: reply 3 names message 2, which its turn t1 did not take`,
    `${S}: reply 3 is "${S}:1" but names message 2, whose reply is "${S}:2"`,
    `${S} turn 1: the reply the client took for message 1 answers one message but names [1,2]`,
  ]);
});

test('reply-attribution: a reply that names no message fails it', () => {
  const h = new History();
  const m1 = h.accept(1);
  h.start('t1', [m1]);
  h.commit('t1', [{ text: expectedReply(S, 1), inReplyTo: [], scope: 'turn' }]);
  assert.deepEqual(named(checkReplies([h.snapshot()], []), 'reply-attribution').details, [
    `${S}: reply 2 names no message`,
  ]);
});

test('replies-in-order: message 6 retried on its own and committed while message 5 waited out its backoff fails it, in the store and at the client', () => {
  const h = new History(5);
  const [m5, m6] = [h.accept(1), h.accept(2)];
  h.start('t1', [m5]);
  h.abort('t1', 'SANDBOX_EXITED', false);
  h.start('t2', [m6]);
  h.commit('t2');
  h.start('t3', [m5]);
  h.commit('t3');
  const snapshot = h.snapshot();
  const results = checkReplies([snapshot], clientOf(h));
  assert.deepEqual(named(results, 'replies-in-order').details, [
    `${S}: reply 8 answers message 5 after reply 7 answered message 6`,
    `${S}: turn t2 took message 6 (event 3) before turn t3, which committed message 5 accepted before it, had ended (event 6)`,
    `${S}: the client received the reply to message 6 (turn 2) before the one to message 5 (turn 1)`,
  ]);
  assert.ok(named(results, 'reply-attribution').passed, 'each reply is still its own message’s');
});

test('replies-in-order: a turn that took a later message while an earlier one stayed pending to the end fails it', () => {
  const h = new History();
  const [m1, m2] = [h.accept(1), h.accept(2)];
  h.start('t1', [m2]);
  h.commit('t1');
  const order = named(checkReplies([h.snapshot()], []), 'replies-in-order');
  assert.deepEqual(order.details, [
    `${S}: turn t1 took message 2 while message ${m1}, accepted before it, was never committed or given up (pending at shutdown)`,
  ]);
});

test('replies-in-order: a message failed for good lets the next one go on', () => {
  const h = new History();
  const [m1, m2] = [h.accept(1), h.accept(2)];
  h.start('t1', [m1]);
  h.abort('t1', 'SANDBOX_PIDS_LIMIT', true);
  h.start('t2', [m2]);
  h.commit('t2');
  assert.ok(named(checkReplies([h.snapshot()], []), 'replies-in-order').passed);
});

test('outcomes-agree: a client whose outcome or failure code is not the store’s fails it', () => {
  const h = new History();
  const [m1, m2, m3] = [h.accept(1), h.accept(2), h.accept(3)];
  h.start('t1', [m1]);
  h.abort('t1', 'STEP_FAILED', true);
  h.start('t2', [m2]);
  h.abort('t2', 'STEP_FAILED', true);
  h.start('t3', [m3]);
  h.commit('t3');
  const agreeing = [
    record(1, m1, { outcome: 'fail', failedCode: 'STEP_FAILED', replyText: null }),
    record(2, m2, { outcome: 'fail', failedCode: 'STEP_FAILED', replyText: null }),
    record(3, m3, { replyId: 4 }),
  ];
  assert.ok(named(checkReplies([h.snapshot()], agreeing), 'outcomes-agree').passed);
  const disagreeing = [
    record(1, m1, { outcome: 'fail', failedCode: 'SANDBOX_EXITED', replyText: null }),
    record(2, m2, { replyId: 4 }),
    record(3, m3, { outcome: 'fail', failedCode: 'STEP_FAILED', replyText: null }),
  ];
  assert.deepEqual(named(checkReplies([h.snapshot()], disagreeing), 'outcomes-agree').details, [
    `${S} turn 1: the client saw message 1 fail with SANDBOX_EXITED, the store has STEP_FAILED`,
    `${S} turn 2: the client got its reply but the store has message 2 failed`,
    `${S} turn 2: the client got its reply but 0 committed replies name message 2`,
    `${S} turn 3: the client saw message 3 fail (STEP_FAILED), the store has it done (error code null)`,
  ]);
  assert.deepEqual(
    named(checkReplies([h.snapshot()], [record(3, m3, { replyId: 99 })]), 'outcomes-agree').details,
    [`${S} turn 3: the client took reply 99 for message 3, the store's is 4`],
  );
});

test('excusedMessages: only messages after an earlier fail or unknown of their own session', () => {
  const s2 = (turn: number, messageId: number, outcome: RequestRecord['outcome']) => ({
    ...record(turn, messageId, { outcome }),
    session: 's2',
  });
  const requests = [
    record(1, 1),
    record(2, 2, { outcome: 'fail' }),
    record(3, 3, { outcome: 'fail' }),
    record(4, 4),
    s2(1, 11, 'ok'),
    s2(2, 12, 'unknown'),
    s2(3, 13, 'ok'),
    { ...record(1, 21), session: 's3' },
  ];
  assert.deepEqual(
    [...excusedMessages(requests)],
    [
      [3, `it came after ${S} turn 2 (message 2) ended fail`],
      [4, `it came after ${S} turn 2 (message 2) ended fail`],
      [13, 'it came after s2 turn 2 (message 12) ended unknown'],
    ],
  );
});

/** A session whose message 2's turn failed step `index` of its plan, then failed for good; message 1 committed. */
function failedStepSession(index: number): SessionSnapshot {
  const h = new History();
  const [m1, m2] = [h.accept(1), h.accept(2)];
  h.start('t1', [m1]);
  h.commit('t1');
  h.start('t2', [m2]);
  h.failStep('t2', m2, index);
  h.abort('t2', 'STEP_FAILED', true);
  return h.snapshot();
}

test('the excuse: a failed assert is excused only when an earlier message of its session ended fail or unknown', () => {
  const s = failedStepSession(0); // message 2's assertFile
  const partialReads = (requests: RequestRecord[]) =>
    named(failedSteps([s], excusedMessages(requests)), 'no-partial-reads');
  const afterOk = partialReads([record(1, 1), record(2, 2, { outcome: 'fail' })]);
  assert.equal(afterOk.passed, false, 'its predecessor was ok: nothing excuses it');
  assert.match(afterOk.details[0]!, /^s1 turn t2 .*STEP_FAILED/);
  for (const outcome of ['fail', 'unknown'] as const) {
    const afterFail = partialReads([record(1, 1, { outcome }), record(2, 2, { outcome: 'fail' })]);
    assert.ok(afterFail.passed, `after an earlier ${outcome}`);
    assert.match(afterFail.summary, /\(1 excused\)$/);
    assert.deepEqual(
      afterFail.excused.map((l) => l.replace(/^.*\[/, '[')),
      [`[message 2: it came after ${S} turn 1 (message 1) ended ${outcome}]`],
    );
  }
  const otherSession = partialReads([{ ...record(1, 1, { outcome: 'fail' }), session: 's2' }]);
  assert.equal(otherSession.passed, false, "another session's failure excuses nothing here");
});

test('the excuse covers failed asserts only: a stray background process after an earlier fail still fails', () => {
  // Turn 2's plan has no stray check; its step 2 is the append, an "other" step.
  const s = failedStepSession(2);
  const excused = excusedMessages([record(1, 1, { outcome: 'fail' }), record(2, 2, { outcome: 'fail' })]);
  assert.equal(named(failedSteps([s], excused), 'no-failed-steps').passed, false);
});

/**
 * Two committed turns (message 1 alone, then messages 2 and 3 together) with their state,
 * and a data dir whose committed workspace holds `files` (path → content; a path ending in
 * `/` is an empty dir). The committed-workspace verdict on them.
 */
async function committedVerdict(
  t: TestContext,
  files: Record<string, string>,
  state: Record<string, unknown> = { [STATE_KEY]: 3 },
): Promise<InvariantResult> {
  const h = new History();
  const m1 = h.accept(1);
  h.start('t1', [m1]);
  h.commit('t1');
  const [m2, m3] = [h.accept(2), h.accept(3)];
  h.start('t2', [m2, m3]);
  h.commit('t2');
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-committed-test-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const committed = workspaceLayout(dataDir).committedPath(S);
  await mkdir(committed, { recursive: true });
  for (const [path, content] of Object.entries(files)) {
    const at = join(committed, path);
    if (path.endsWith('/')) await mkdir(at, { recursive: true });
    else await mkdir(dirname(at), { recursive: true }).then(() => writeFile(at, content));
  }
  const sessions = [{ ...h.snapshot(), state }];
  return committedWorkspace({ sessions, requests: clientOf(h) }, committedDirOf(dataDir));
}

test('committed-workspace holds when the committed tree and state are exactly what the committed messages wrote', async (t) => {
  const verdict = await committedVerdict(t, { [LOG_FILE]: expectedLog(3) });
  assert.deepEqual(verdict.details, []);
});

test('committed-workspace fails on a file no committed message wrote, beside the right log', async (t) => {
  const verdict = await committedVerdict(t, { [LOG_FILE]: expectedLog(3), 'tmp/partial.txt': 'x' });
  assert.deepEqual(verdict.details, [
    `${S}: no committed message wrote tmp, tmp/partial.txt (3 messages committed)`,
  ]);
});

test('committed-workspace fails on an empty dir no committed message made', async (t) => {
  const verdict = await committedVerdict(t, { [LOG_FILE]: expectedLog(3), 'cache/': '' });
  assert.deepEqual(verdict.details, [`${S}: no committed message wrote cache (3 messages committed)`]);
});

test('committed-workspace fails on a missing file', async (t) => {
  const verdict = await committedVerdict(t, {});
  assert.deepEqual(verdict.details, [`${S}: missing log.txt (3 messages committed)`]);
});

test("committed-workspace fails on a changed file: an aborted attempt's half-written turn", async (t) => {
  const verdict = await committedVerdict(t, { [LOG_FILE]: `${expectedLog(3)}4:a\n` });
  assert.equal(verdict.passed, false);
  assert.match(verdict.details.join('\n'), /s1: log\.txt is ".*3:b\\n4:a\\n", expected ".*3:b\\n"/);
});

test('committed-workspace fails on a state that is not what the committed messages put', async (t) => {
  const verdict = await committedVerdict(t, { [LOG_FILE]: expectedLog(3) }, { [STATE_KEY]: 3, stray: 1 });
  assert.deepEqual(verdict.details, [`${S}: state is {"turns":3,"stray":1}, expected {"turns":3}`]);
});

test("committed-workspace leaves out the runner's own dir and state keys, which no message writes", async (t) => {
  const verdict = await committedVerdict(
    t,
    { [LOG_FILE]: expectedLog(3), '.berth/': '', '.berth/home/x': 'y' },
    { [STATE_KEY]: 3, 'berth.conversation': [] },
  );
  assert.deepEqual(verdict.details, []);
  const elsewhere = await committedVerdict(t, { [LOG_FILE]: expectedLog(3), 'a/.berth/x': 'y' });
  assert.deepEqual(elsewhere.details, [
    `${S}: no committed message wrote a, a/.berth, a/.berth/x (3 messages committed)`,
  ]);
});
