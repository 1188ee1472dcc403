/**
 * The invariants of a chaos run's replies, per session, from the store snapshot and the
 * client's records. Pure.
 *
 *   replies-in-order   a session's messages are answered in the order they were accepted:
 *                      the store's replies, in id order, answer its messages in ascending id
 *                      (a reply to message 6 never precedes the first reply to message 5);
 *                      a turn that took a message started only after every earlier message
 *                      it did not take was committed or given up, and the turn that did so
 *                      had ended (in the store's event order, which is its commit order);
 *                      and each client received its replies in message order
 *   reply-attribution  each reply is its own message's: it names only messages its turn took,
 *                      a `message`-scoped one names exactly one, and its text is the reply
 *                      the plan of every message it names asks for (expectedReply: the
 *                      message's identity in the workload); the reply a client took for its
 *                      message is that message's, by the same rules
 *   outcomes-agree     each request's outcome is what the store says of its message: ok, the
 *                      message is done and exactly one committed reply names it, the one the
 *                      client took; fail by a `failed` event, the message is failed with the
 *                      error code that event carried
 *
 * Invariants of this module: each named invariant appears exactly once in the result, with
 * `details` naming the sessions, turns and ids at fault; an unknown request is not compared
 * (it may or may not have been processed), nor an acknowledged message the store does not
 * hold (acknowledged-kept reports it).
 */
import type { Message } from '../core/index.js';
import { type InvariantResult, result } from './invariant-result.js';
import type { RequestRecord } from './session-driver.js';
import type { SessionSnapshot } from './snapshot.js';
import { expectedReply, readPlan } from './workload.js';

export function checkReplies(sessions: SessionSnapshot[], requests: RequestRecord[]): InvariantResult[] {
  return [
    repliesInOrder(sessions, requests),
    replyAttribution(sessions, requests),
    outcomesAgree(sessions, requests),
  ];
}

/** The session's replies from committed turns, by each inbound message they name. */
export function repliesByMessage(s: SessionSnapshot): Map<number, Message[]> {
  const committed = new Set(s.turns.filter((t) => t.status === 'committed').map((t) => t.id));
  const replies = new Map<number, Message[]>();
  for (const out of outbound(s).filter((m) => m.turnId !== null && committed.has(m.turnId)))
    for (const id of out.inReplyTo ?? []) replies.set(id, [...(replies.get(id) ?? []), out]);
  return replies;
}

export function repliesInOrder(sessions: SessionSnapshot[], requests: RequestRecord[]): InvariantResult {
  const details = sessions.flatMap((s) => [...storeReplyOrder(s), ...turnOrder(s)]);
  details.push(...clientReplyOrder(requests));
  const turns = sessions.reduce((n, s) => n + s.turns.length, 0);
  return result(
    'replies-in-order',
    `${replyCount(sessions)} replies and ${turns} turns in the store, ${received(requests).length} replies clients received: in message order`,
    details,
  );
}

export function replyAttribution(sessions: SessionSnapshot[], requests: RequestRecord[]): InvariantResult {
  const details = sessions.flatMap(storeAttribution);
  for (const r of received(requests)) {
    const want = expectedReply(r.session, r.turn);
    const at = `${r.session} turn ${r.turn}: the reply the client took for message ${r.messageId}`;
    if (r.replyText !== want)
      details.push(`${at} is ${JSON.stringify(r.replyText)}, expected ${JSON.stringify(want)}`);
    if (r.reply?.scope === 'message' && r.reply.inReplyTo.length !== 1)
      details.push(`${at} answers one message but names ${JSON.stringify(r.reply.inReplyTo)}`);
  }
  return result(
    'reply-attribution',
    `${replyCount(sessions)} replies in the store, ${received(requests).length} replies clients took: each its own message's`,
    details,
  );
}

export function outcomesAgree(sessions: SessionSnapshot[], requests: RequestRecord[]): InvariantResult {
  const bySession = new Map(sessions.map((s) => [s.id, s]));
  const replies = new Map(sessions.map((s) => [s.id, repliesByMessage(s)]));
  const details: string[] = [];
  const ended = requests.filter((r) => r.messageId !== null && r.outcome !== 'unknown');
  for (const r of ended) {
    const m = bySession.get(r.session)?.messages.find((x) => x.id === r.messageId && x.direction === 'in');
    if (!m) continue;
    const at = `${r.session} turn ${r.turn}`;
    if (r.outcome === 'ok') {
      const answers = replies.get(r.session)?.get(m.id) ?? [];
      if (m.status !== 'done')
        details.push(`${at}: the client got its reply but the store has message ${m.id} ${m.status}`);
      if (answers.length !== 1)
        details.push(
          `${at}: the client got its reply but ${answers.length} committed replies name message ${m.id}`,
        );
      else if (answers[0]!.id !== r.reply?.id)
        details.push(
          `${at}: the client took reply ${r.reply?.id} for message ${m.id}, the store's is ${answers[0]!.id}`,
        );
    } else if (m.status !== 'failed' || m.errorCode === null)
      details.push(
        `${at}: the client saw message ${m.id} fail (${r.failedCode}), the store has it ${m.status} (error code ${m.errorCode})`,
      );
    else if (r.failedCode !== m.errorCode)
      details.push(
        `${at}: the client saw message ${m.id} fail with ${r.failedCode}, the store has ${m.errorCode}`,
      );
  }
  return result(
    'outcomes-agree',
    `${ended.length} requests that ended ok or fail: each as the store has its message`,
    details,
  );
}

/** Replies that first answer a message after a reply to a later message of the session. */
function storeReplyOrder(s: SessionSnapshot): string[] {
  const details: string[] = [];
  const answered = new Set<number>();
  let latest: { reply: number; message: number } | null = null;
  for (const r of outbound(s).sort((a, b) => a.id - b.id)) {
    const names = r.inReplyTo ?? [];
    for (const id of names.filter((x) => !answered.has(x) && latest !== null && x < latest.message))
      details.push(
        `${s.id}: reply ${r.id} answers message ${id} after reply ${latest!.reply} answered message ${latest!.message}`,
      );
    for (const id of names) {
      answered.add(id);
      if (latest === null || id > latest.message) latest = { reply: r.id, message: id };
    }
  }
  return details;
}

/** Turns that took a message while an earlier one they did not take was not yet committed or given up. */
function turnOrder(s: SessionSnapshot): string[] {
  const spans = turnSpans(s);
  const inbound = s.messages.filter((m) => m.direction === 'in');
  const details: string[] = [];
  for (const t of s.turns) {
    const start = spans.get(t.id)?.start;
    if (start === undefined) continue;
    const latest = Math.max(...t.messageIds);
    for (const a of inbound.filter((m) => m.id < latest && !t.messageIds.includes(m.id))) {
      const open = a.status === 'pending' || a.status === 'processing';
      // A message failed outside any turn (archived) has no end to compare: it holds nothing.
      const end = open
        ? Number.POSITIVE_INFINITY
        : (spans.get(a.turnId ?? '')?.end ?? Number.NEGATIVE_INFINITY);
      if (end < start) continue;
      details.push(
        open
          ? `${s.id}: turn ${t.id} took message ${latest} while message ${a.id}, accepted before it, was never committed or given up (${a.status} at shutdown)`
          : `${s.id}: turn ${t.id} took message ${latest} (event ${start}) before turn ${a.turnId}, which ${a.status === 'done' ? 'committed' : 'gave up'} message ${a.id} accepted before it, had ended (event ${end})`,
      );
    }
  }
  return details;
}

/** Each turn's `started` event id and its last event's id (its commit's replies, its abort's retries). */
function turnSpans(s: SessionSnapshot): Map<string, { start?: number; end: number }> {
  const spans = new Map<string, { start?: number; end: number }>();
  for (const e of s.events) {
    if (typeof e.data.turnId !== 'string') continue;
    const span = spans.get(e.data.turnId) ?? { end: e.id };
    if (e.type === 'started') span.start = e.id;
    span.end = Math.max(span.end, e.id);
    spans.set(e.data.turnId, span);
  }
  return spans;
}

/** Replies a client received before one to an earlier message of its session. */
function clientReplyOrder(requests: RequestRecord[]): string[] {
  const details: string[] = [];
  const before = new Map<string, RequestRecord>();
  for (const r of received(requests).sort((a, b) => a.messageId! - b.messageId!)) {
    const prev = before.get(r.session);
    if (prev && r.reply!.arrival < prev.reply!.arrival)
      details.push(
        `${r.session}: the client received the reply to message ${r.messageId} (turn ${r.turn}) before the one to message ${prev.messageId} (turn ${prev.turn})`,
      );
    before.set(r.session, r);
  }
  return details;
}

function storeAttribution(s: SessionSnapshot): string[] {
  const took = new Map(s.turns.map((t) => [t.id, t.messageIds]));
  const wanted = new Map(
    s.messages.filter((m) => m.direction === 'in').map((m) => [m.id, readPlan(m.text)?.reply ?? null]),
  );
  const scopes = new Map(
    s.events.filter((e) => e.type === 'reply').map((e) => [Number(e.data.messageId), e.data.scope]),
  );
  const details: string[] = [];
  for (const r of outbound(s)) {
    const names = r.inReplyTo ?? [];
    if (names.length === 0) details.push(`${s.id}: reply ${r.id} names no message`);
    if (scopes.get(r.id) === 'message' && names.length > 1)
      details.push(`${s.id}: reply ${r.id} answers one message but names ${JSON.stringify(names)}`);
    for (const id of names) {
      if (!took.get(r.turnId ?? '')?.includes(id))
        details.push(`${s.id}: reply ${r.id} names message ${id}, which its turn ${r.turnId} did not take`);
      const want = wanted.get(id) ?? null;
      if (want !== null && r.text !== want)
        details.push(
          `${s.id}: reply ${r.id} is ${JSON.stringify(r.text)} but names message ${id}, whose reply is ${JSON.stringify(want)}`,
        );
    }
  }
  return details;
}

function replyCount(sessions: SessionSnapshot[]): number {
  return sessions.reduce((n, s) => n + outbound(s).length, 0);
}

function outbound(s: SessionSnapshot): Message[] {
  return s.messages.filter((m) => m.direction === 'out');
}

/** The ok requests: those whose client took a reply. */
function received(requests: RequestRecord[]): RequestRecord[] {
  return requests.filter((r) => r.outcome === 'ok' && r.messageId !== null);
}
