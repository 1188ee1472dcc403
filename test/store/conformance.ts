/**
 * The Store conformance suite: every implementation must pass it unchanged. It drives the
 * transitions the way a worker and a sandbox do and checks what a client then reads.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  agentSpecSchema,
  BY_CREATION,
  isBerthError,
  type RetryPolicy,
  type SandboxRecord,
  type SessionView,
} from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';

export const LEASE_MS = 10_000;
export const RETRY: RetryPolicy = { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 3 };
export const BASE = 1_700_000_000_000;

export type OpenStore = () => Promise<Store>;

export async function withAgent(open: OpenStore): Promise<Store> {
  const store = await open();
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), BASE);
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 2, heartbeatAt: BASE, startedAt: BASE });
  await store.registerWorker({ id: 'w2', host: 'h', pid: 2, slots: 2, heartbeatAt: BASE, startedAt: BASE });
  return store;
}

/** What a worker does to take a session: claim it (worker `w1` unless named), then start its turn. */
export async function claimAndStartTurn(store: Store, now: number, workerId = 'w1') {
  const claim = await store.claimRunnableSession(workerId, now);
  assert.ok(claim, 'a runnable session to claim');
  const fence = { sessionId: claim.session.id, generation: claim.session.generation, workerId };
  const started = await store.startTurn(fence, now);
  assert.equal(started.code, 'ok');
  const turn = started.code === 'ok' && started.value ? started.value.turn : assert.fail('no turn');
  return { fence, turn };
}

export function runStoreConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance: ${kind}`, () => {
    test('enqueue creates the session once, keeps its agent, and queues FIFO', async () => {
      const store = await withAgent(open);
      const a = await store.enqueueMessage({ sessionId: 'a', agent: 'sh', text: 'one', now: BASE });
      const b = await store.enqueueMessage({ sessionId: 'b', agent: 'sh', text: 'two', now: BASE + 1 });
      await store.enqueueMessage({ sessionId: 'a', text: 'three', now: BASE + 2 });
      assert.equal(a.view.queuePosition, 1);
      assert.equal(b.view.queuePosition, 2);
      assert.equal(b.view.status, 'queued');
      const claimed = await store.claimRunnableSession('w1', BASE + 3);
      assert.equal(claimed?.session.id, 'a');
      assert.equal(claimed?.session.generation, 1);
      assert.equal((await store.getSessionView('b', BASE + 3))?.queuePosition, 1);
      await store.close();
    });

    test("the change feed's reads: the event log in an id range with tenants, its newest id, every queue position", async () => {
      const store = await withAgent(open);
      assert.equal(await store.lastEventId(), 0);
      const a = await store.enqueueMessage({ sessionId: 'a', agent: 'sh', text: 'one', now: BASE });
      const b = await store.enqueueMessage({ sessionId: 'b', agent: 'sh', text: 'two', now: BASE + 1 });
      const c = await store.enqueueMessage({ sessionId: 'c', agent: 'sh', text: 'three', now: BASE + 2 });
      assert.equal(await store.lastEventId(), c.eventId);
      const log = await store.eventLog(a.eventId, c.eventId, 10);
      assert.deepEqual(
        log.map((e) => [e.id, e.sessionId, e.type, e.tenant]),
        [
          [b.eventId, 'b', 'queued', 'default'],
          [c.eventId, 'c', 'queued', 'default'],
        ],
      );
      assert.deepEqual(
        (await store.eventLog(0, b.eventId, 1)).map((e) => e.id),
        [a.eventId],
        'a page of `limit` rows',
      );
      assert.deepEqual(
        [...(await store.queuePositions(BASE + 3))],
        [
          ['a', 1],
          ['b', 2],
          ['c', 3],
        ],
      );
      await store.claimRunnableSession('w1', BASE + 3);
      assert.deepEqual(
        [...(await store.queuePositions(BASE + 3))],
        [
          ['b', 1],
          ['c', 2],
        ],
      );
      assert.equal(
        (await store.getSessionView('c', BASE + 3))?.queuePosition,
        (await store.queuePositions(BASE + 3)).get('c'),
        'the position a view shows',
      );
      await store.close();
    });

    test('bad enqueues store nothing', async () => {
      const store = await withAgent(open);
      const cases = [
        { input: { sessionId: 'x', agent: 'ghost', text: 't', now: BASE }, code: 'AGENT_NOT_FOUND' as const },
        { input: { sessionId: 'x', text: 't', now: BASE }, code: 'AGENT_REQUIRED' as const },
      ];
      for (const c of cases) {
        await assert.rejects(store.enqueueMessage(c.input), (e: unknown) => isBerthError(e, c.code));
      }
      assert.equal(await store.getSessionView('x', BASE), null);
      await store.enqueueMessage({ sessionId: 'y', agent: 'sh', text: 't', now: BASE });
      await store.createAgent(agentSpecSchema.parse({ name: 'other', provider: 'script' }), BASE);
      await assert.rejects(
        store.enqueueMessage({ sessionId: 'y', agent: 'other', text: 't', now: BASE }),
        (e: unknown) => isBerthError(e, 'SESSION_AGENT_MISMATCH'),
      );
      assert.equal((await store.listMessages('y', 0, 10)).length, 1);
      await store.close();
    });

    test('a turn commits outputs and state atomically, fenced by generation and lease holder', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'echo hi', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      assert.equal(turn.attempt, 1);
      assert.equal((await store.getSessionView('s', BASE))?.status, 'running');

      const stale = [
        { ...fence, generation: fence.generation - 1 },
        { ...fence, workerId: 'w2' },
      ];
      for (const f of stale) {
        assert.equal(
          await store.commitTurn({ ...f, turnId: turn.id, outputs: [{ text: 'evil' }] }, BASE),
          'stale',
        );
        assert.equal(await store.recordProgress({ ...f, turnId: turn.id, text: 'evil' }, BASE), 'stale');
      }
      assert.equal((await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'out').length, 0);

      assert.equal(
        await store.commitTurn(
          { ...fence, turnId: turn.id, outputs: [{ text: 'hi\n', data: { exitCode: 0 } }] },
          BASE + 5,
        ),
        'ok',
      );
      assert.equal(
        await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'twice' }] }, BASE + 6),
        'stale',
      );
      const messages = await store.listMessages('s', 0, 10);
      assert.deepEqual(
        messages.map((m) => [m.direction, m.status, m.text]),
        [
          ['in', 'done', 'echo hi'],
          ['out', 'done', 'hi\n'],
        ],
      );
      const view = (await store.getSessionView('s', BASE + 6))!;
      assert.equal(view.lastReply?.text, 'hi\n');
      assert.deepEqual(view.lastReply?.data, { exitCode: 0 });
      assert.equal(view.status, 'bound');
      const events = await store.eventsAfter('s', 0, 100);
      assert.deepEqual(
        events.map((e) => e.type),
        ['queued', 'started', 'reply'],
      );
      await store.close();
    });

    test('an aborted turn retries with backoff and fails after maxTries', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      let now = BASE;
      for (let attempt = 1; attempt <= RETRY.maxTries; attempt++) {
        const { fence, turn } = await claimAndStartTurn(store, now);
        assert.equal(turn.attempt, attempt);
        assert.equal(
          await store.abortTurn(
            { ...fence, turnId: turn.id, code: 'TURN_FAILED', error: 'the agent failed the turn' },
            now,
          ),
          'ok',
        );
        assert.equal(await store.releaseSession(fence, now), 'ok');
        if (attempt < RETRY.maxTries) {
          const backoff = 1000 * 2 ** (attempt - 1);
          assert.equal(
            await store.claimRunnableSession('w1', now + backoff - 1),
            null,
            'not before its backoff',
          );
          assert.equal(await store.nextProcessAfter(now), now + backoff);
          assert.equal((await store.getSessionView('s', now))?.status, 'backoff');
          now += backoff;
        }
      }
      const [message] = await store.listMessages('s', 0, 10);
      assert.equal(message?.status, 'failed');
      assert.equal(message?.tries, RETRY.maxTries);
      assert.equal((await store.getSessionView('s', now))?.status, 'failed');
      const types = (await store.eventsAfter('s', 0, 100)).map((e) => e.type);
      assert.equal(types.filter((t) => t === 'retrying').length, RETRY.maxTries - 1);
      assert.equal(types.at(-1), 'failed');
      assert.equal(await store.claimRunnableSession('w1', now + 3_600_000), null);
      await store.close();
    });

    test('each reply names what it answers: a per-message output its own message, an output naming none every message of its turn', async () => {
      const store = await withAgent(open);
      const a = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'echo a', now: BASE });
      const b = await store.enqueueMessage({ sessionId: 's', text: 'echo b', now: BASE + 1 });
      const { fence, turn } = await claimAndStartTurn(store, BASE + 2);
      const [ida, idb] = [a.message.id, b.message.id];
      assert.deepEqual(turn.messageIds, [ida, idb], 'both in one turn');
      const outputs = [
        { text: 'a\n', data: { exitCode: 0 }, inReplyTo: [ida] },
        { text: 'b\n', data: { exitCode: 3 }, inReplyTo: [idb] },
        { text: 'summary' },
      ];
      assert.equal(await store.commitTurn({ ...fence, turnId: turn.id, outputs }, BASE + 3), 'ok');
      const replies = (await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'out');
      assert.deepEqual(
        replies.map((m) => [m.text, m.inReplyTo]),
        [
          ['a\n', [ida]],
          ['b\n', [idb]],
          ['summary', [ida, idb]],
        ],
      );
      const events = (await store.eventsAfter('s', 0, 100)).filter((e) => e.type === 'reply');
      assert.deepEqual(
        events.map((e) => [e.data.text, e.data.inReplyTo, e.data.scope]),
        [
          ['a\n', [ida], 'message'],
          ['b\n', [idb], 'message'],
          ['summary', [ida, idb], 'turn'],
        ],
      );
      await store.close();
    });

    test('a message in backoff holds the later ones: its retry runs alone and first, and once it fails for good the rest go on, in order', async () => {
      const store = await withAgent(open);
      const first = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      let now = BASE;
      let { fence, turn } = await claimAndStartTurn(store, now);
      const second = await store.enqueueMessage({ sessionId: 's', text: 'two', now: now + 1 });
      const third = await store.enqueueMessage({ sessionId: 's', text: 'three', now: now + 2 });
      for (let attempt = 1; attempt <= RETRY.maxTries; attempt++) {
        assert.deepEqual(
          turn.messageIds,
          [first.message.id],
          `attempt ${attempt} takes only the first message`,
        );
        const abort = {
          ...fence,
          turnId: turn.id,
          code: 'TURN_FAILED' as const,
          error: 'the agent failed the turn',
        };
        assert.equal(await store.abortTurn(abort, now + 3), 'ok');
        assert.equal(await store.releaseSession(fence, now + 3), 'ok');
        if (attempt === RETRY.maxTries) break;
        const due = now + 3 + RETRY.retryBaseMs * 2 ** (attempt - 1);
        const view = (await store.getSessionView('s', due - 1))!;
        assert.equal(view.status, 'backoff');
        assert.equal(view.queuePosition, null);
        assert.deepEqual(view.heldBy, { messageId: first.message.id, runnableAt: due });
        assert.equal(await store.claimRunnableSession('w1', due - 1), null, 'the later messages wait for it');
        now = due;
        ({ fence, turn } = await claimAndStartTurn(store, now));
      }
      const failed = (await store.eventsAfter('s', 0, 100)).filter((e) => e.type === 'failed');
      assert.deepEqual(
        failed.map((e) => e.data.messageId),
        [first.message.id],
      );
      assert.equal((await store.getSessionView('s', now + 3))?.heldBy, null);
      const next = await claimAndStartTurn(store, now + 3);
      assert.deepEqual(
        next.turn.messageIds,
        [second.message.id, third.message.id],
        'the rest go on together',
      );
      await store.close();
    });

    test('a holder lost mid-turn with a later message sent: the later message runs only after the earlier one', async () => {
      const store = await withAgent(open);
      const first = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      await claimAndStartTurn(store, BASE);
      const second = await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 1 });
      // w1 dies; w2 finds the session in the dead holders' queue, through its new message.
      const later = BASE + LEASE_MS + 1;
      assert.equal(await store.renewWorker('w2', later), true);
      assert.equal(
        await store.claimRunnableSession('w2', later),
        null,
        'reclaimed, but the first now waits out its backoff',
      );
      assert.equal((await store.getSessionView('s', later))?.heldBy?.messageId, first.message.id);
      const due = later + RETRY.retryBaseMs;
      assert.equal(await store.renewWorker('w2', due), true);
      const retry = await claimAndStartTurn(store, due, 'w2');
      assert.deepEqual(retry.turn.messageIds, [first.message.id]);
      const outputs = [{ text: 'one done', inReplyTo: [first.message.id] }];
      assert.equal(await store.commitTurn({ ...retry.fence, turnId: retry.turn.id, outputs }, due + 1), 'ok');
      const next = await store.startTurn(retry.fence, due + 2);
      assert.deepEqual(next.code === 'ok' ? next.value?.turn.messageIds : null, [second.message.id]);
      await store.close();
    });

    test('a turn whose sandbox died is due again at once, its try spent; a second death backs off', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      const loseSandbox = async (now: number, workerId: string) => {
        const { fence, turn } = await claimAndStartTurn(store, now, workerId);
        const abort = { ...fence, turnId: turn.id, code: 'SANDBOX_EXITED' as const, error: 'sandbox exited' };
        assert.equal(await store.abortTurn(abort, now + 5), 'ok');
        assert.equal(await store.releaseSession(fence, now + 5), 'ok');
        return (await store.listMessages('s', 0, 1))[0]!;
      };
      const first = await loseSandbox(BASE, 'w1');
      assert.deepEqual([first.tries, first.processAfter], [1, BASE + 5]);
      assert.equal((await store.eventsAfter('s', 0, 10)).at(-1)?.data.retryInMs, 0);
      const second = await loseSandbox(BASE + 5, 'w2');
      assert.deepEqual([second.tries, second.processAfter], [2, BASE + 10 + RETRY.retryBaseMs]);
      assert.equal(
        await store.claimRunnableSession('w1', BASE + 10),
        null,
        'the second retry waits out its backoff',
      );
      await store.close();
    });

    test('a worker marked draining keeps the first time, through a rejoin; an unknown worker is refused', async () => {
      const store = await withAgent(open);
      assert.equal((await store.getWorker('w1'))?.drainingSince, null);
      assert.equal(await store.drainWorker('w1', BASE + 5), true);
      assert.equal(await store.drainWorker('w1', BASE + 9), true, 'asked again: still draining');
      await store.registerWorker({
        id: 'w1',
        host: 'h',
        pid: 1,
        slots: 2,
        heartbeatAt: BASE + 10,
        startedAt: BASE,
      });
      assert.equal((await store.getWorker('w1'))?.drainingSince, BASE + 5);
      assert.deepEqual((await store.listWorkers()).map((w) => [w.id, w.drainingSince]).sort(), [
        ['w1', BASE + 5],
        ['w2', null],
      ]);
      assert.equal(await store.drainWorker('nobody', BASE), false);
      assert.equal(await store.getWorker('nobody'), null);
      await store.close();
    });

    test('a turn aborted because its worker was asked to stop is requeued at once, its try given back', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const abort = { ...fence, turnId: turn.id, code: 'WORKER_STOPPING' as const, error: 'worker stopping' };
      assert.equal(await store.abortTurn(abort, BASE + 5), 'ok');
      const [message] = await store.listMessages('s', 0, 1);
      assert.equal(message?.status, 'pending');
      assert.equal(message?.tries, 0);
      assert.equal(message?.processAfter, BASE + 5);
      assert.equal((await store.eventsAfter('s', 0, 10)).at(-1)?.data.retryInMs, 0);
      await store.releaseSession(fence, BASE + 5);
      assert.equal((await store.claimRunnableSession('w2', BASE + 5))?.session.id, 's', 'claimable at once');
      await store.close();
    });

    test('a terminal abort (a sandbox limit the turn hit) fails its messages on the first try', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const error = 'killed at 512 MiB';
      const code = 'SANDBOX_OUT_OF_MEMORY';
      assert.equal(await store.abortTurn({ ...fence, turnId: turn.id, code, error }, BASE + 5), 'ok');
      const [message] = await store.listMessages('s', 0, 1);
      assert.equal(message?.status, 'failed');
      assert.equal(message?.tries, 1);
      assert.equal(message?.errorCode, code);
      assert.equal((await store.getTurn(turn.id))?.errorCode, code);
      const last = (await store.eventsAfter('s', 0, 10)).at(-1);
      assert.equal(last?.type, 'failed');
      assert.equal(last?.data.code, code);
      assert.equal(last?.data.error, error);
      await store.close();
    });

    test("a dead worker's sessions are reclaimed: turn aborted, lease cleared, next claim bumps the generation", async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      const { fence: oldFence, turn } = await claimAndStartTurn(store, BASE);

      assert.equal(await store.renewWorker('w2', BASE + LEASE_MS), true);
      assert.deepEqual(await store.reclaimExpiredLeases(BASE + LEASE_MS - 1), []);
      assert.deepEqual(await store.reclaimExpiredLeases(BASE + LEASE_MS), ['s']);
      const after = BASE + LEASE_MS + RETRY.retryBaseMs;
      const taken = (await store.claimRunnableSession('w2', after))!;
      assert.equal(taken.session.generation, oldFence.generation + 1);
      assert.equal(
        await store.commitTurn({ ...oldFence, turnId: turn.id, outputs: [{ text: 'late' }] }, after),
        'stale',
      );
      assert.equal((await store.listTurns('s'))[0]?.status, 'aborted');
      await store.close();
    });

    test('renewWorker reports a missing row so the worker can fence itself', async () => {
      const store = await withAgent(open);
      assert.equal(await store.renewWorker('w1', BASE + 1), true);
      await store.removeWorker('w1');
      assert.equal(await store.renewWorker('w1', BASE + 2), false);
      await store.close();
    });

    test('workers claiming at the same instant: each session goes to one of them, once', async () => {
      const store = await withAgent(open);
      for (const id of ['a', 'b', 'c'])
        await store.enqueueMessage({ sessionId: id, agent: 'sh', text: 'x', now: BASE });
      const claims = await Promise.all(
        ['w1', 'w2', 'w1', 'w2', 'w1', 'w2'].map((w) => store.claimRunnableSession(w, BASE + 1)),
      );
      const won = claims.filter((c) => c !== null).map((c) => c!.session.id);
      // A claim that lost a race may come back empty (the claim loop then tries again): finish like it.
      for (
        let c = await store.claimRunnableSession('w1', BASE + 1);
        c;
        c = await store.claimRunnableSession('w1', BASE + 1)
      )
        won.push(c.session.id);
      assert.deepEqual([...won].sort(), ['a', 'b', 'c'], 'every session claimed exactly once');
      for (const id of ['a', 'b', 'c'])
        assert.equal((await store.getSessionView(id, BASE + 1))?.generation, 1);
      await store.close();
    });

    test('queue positions follow claim order (oldest pending message first) through backoff, a dead holder and archiving; a listing agrees with each view', async () => {
      const store = await withAgent(open);
      for (const [i, id] of ['a', 'b', 'c', 'd'].entries())
        await store.enqueueMessage({ sessionId: id, agent: 'sh', text: 'x', now: BASE + i });
      /** Every session's position, checked against the listing and the depth. */
      const positions = async (now: number) => {
        const listed = await store.listSessionViews(now);
        for (const v of listed) assert.deepEqual(await store.getSessionView(v.id, now), v, `view of ${v.id}`);
        // Pages of one (a queued session counted alone) and of three (several read with the queue) agree.
        for (const limit of [1, 3]) {
          const paged: SessionView[] = [];
          for (let after: string | undefined; ; ) {
            const page = await store.listSessionViews(now, undefined, { after, limit });
            paged.push(...page);
            if (page.length < limit) break;
            after = BY_CREATION.cursorOf(page.at(-1)!);
          }
          assert.deepEqual(paged, listed, `pages of ${limit}`);
        }
        const queued = listed.filter((v) => v.queuePosition !== null);
        assert.equal(await store.queueDepth(now), queued.length);
        return Object.fromEntries(queued.map((v) => [v.id, v.queuePosition]));
      };
      assert.deepEqual(await positions(BASE + 4), { a: 1, b: 2, c: 3, d: 4 });

      // a's turn fails: its message waits out its backoff, out of the queue.
      const first = await claimAndStartTurn(store, BASE + 5);
      assert.equal(first.fence.sessionId, 'a');
      const abort = {
        ...first.fence,
        turnId: first.turn.id,
        code: 'TURN_FAILED' as const,
        error: 'failed',
      };
      assert.equal(await store.abortTurn(abort, BASE + 5), 'ok');
      assert.equal(await store.releaseSession(first.fence, BASE + 5), 'ok');
      assert.deepEqual(await positions(BASE + 6), { b: 1, c: 2, d: 3 });
      // A new message waits behind the one in backoff: a stays out of the queue, held by it.
      await store.enqueueMessage({ sessionId: 'a', text: 'y', now: BASE + 7 });
      assert.deepEqual(await positions(BASE + 8), { b: 1, c: 2, d: 3 });
      assert.deepEqual((await store.getSessionView('a', BASE + 8))?.heldBy, {
        messageId: first.turn.messageIds[0],
        runnableAt: BASE + 5 + RETRY.retryBaseMs,
      });
      // Its backoff over, a is back at the place of its oldest pending message.
      const due = BASE + 5 + RETRY.retryBaseMs;
      assert.deepEqual(await positions(due), { a: 1, b: 2, c: 3, d: 4 });

      // w2 retries the failed message on its own, then dies holding a.
      const second = await claimAndStartTurn(store, due, 'w2');
      assert.equal(second.fence.sessionId, 'a');
      assert.deepEqual(
        second.turn.messageIds,
        first.turn.messageIds,
        'the retry takes only the retried message',
      );
      assert.deepEqual(await positions(due + 1), { b: 1, c: 2, d: 3 });
      const later = due + LEASE_MS + 10;
      assert.equal(await store.renewWorker('w1', later), true);
      assert.deepEqual(
        await positions(later),
        { b: 1, c: 2, d: 3, a: 4 },
        "a dead holder's session is queued, at the place of its oldest pending message (y)",
      );
      // The sweep aborts the dead holder's turn: the retried message waits out its backoff again, holding y.
      assert.deepEqual(await store.reclaimExpiredLeases(later), ['a']);
      assert.equal((await store.getTurn(second.turn.id))?.status, 'aborted');
      assert.deepEqual(await positions(later), { b: 1, c: 2, d: 3 });
      assert.equal((await store.getSessionView('a', later))?.heldBy?.messageId, first.turn.messageIds[0]);

      await store.archiveSession('c', later);
      assert.deepEqual(await positions(later), { b: 1, d: 2 });
      await store.close();
    });

    test('a worker that stops holding a lease leaves its row expired for the sweep; a worker whose row is gone or stale claims nothing', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      await store.enqueueMessage({ sessionId: 't', agent: 'sh', text: 'x', now: BASE });
      await claimAndStartTurn(store, BASE + 1);
      assert.equal(await store.liveSlots(BASE + 1), 4);
      await store.removeWorker('w1');
      assert.equal(await store.liveSlots(BASE + 1), 2, 'its row is dead at once');
      assert.deepEqual(await store.reclaimExpiredLeases(BASE + 2), ['s']);
      assert.deepEqual(
        (await store.listWorkers()).map((w) => w.id),
        ['w2'],
        'the row went with its last lease',
      );
      assert.equal(await store.claimRunnableSession('w1', BASE + 3), null, 'no row: no claim');
      assert.equal(await store.claimRunnableSession('w2', BASE + LEASE_MS), null, 'a stale row: no claim');
      assert.equal(await store.renewWorker('w2', BASE + LEASE_MS), true);
      assert.equal(
        (await store.claimRunnableSession('w2', BASE + LEASE_MS))?.session.id,
        's',
        'its retried message is due, and oldest',
      );
      await store.close();
    });

    test('a sweep takes over every expired lease, more than one of its transactions holds', async () => {
      const store = await withAgent(open);
      const ids = Array.from({ length: 150 }, (_, i) => `s${String(i).padStart(3, '0')}`);
      for (const id of ids) await store.enqueueMessage({ sessionId: id, agent: 'sh', text: 'x', now: BASE });
      for (const _ of ids) assert.ok(await store.claimRunnableSession('w1', BASE + 1));
      assert.equal(await store.renewWorker('w2', BASE + LEASE_MS), true);
      assert.deepEqual(await store.reclaimExpiredLeases(BASE + LEASE_MS), ids);
      assert.equal(await store.queueDepth(BASE + LEASE_MS), 150);
      await store.close();
    });

    test('first messages of one new session sent at once create it once and keep both', async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'other', provider: 'script' }), BASE);
      const results = await Promise.allSettled(
        ['sh', 'sh', 'other'].map((agent, i) =>
          store.enqueueMessage({ sessionId: 'new', agent, text: `m${i}`, now: BASE }),
        ),
      );
      const agent = (await store.getSessionView('new', BASE))?.agent;
      const accepted = results.filter((r) => r.status === 'fulfilled').length;
      assert.equal(accepted, agent === 'sh' ? 2 : 1, 'the messages of the agent that won are kept');
      for (const r of results)
        if (r.status === 'rejected') assert.ok(isBerthError(r.reason, 'SESSION_AGENT_MISMATCH'));
      assert.equal((await store.listMessages('new', 0, 10)).length, accepted);
      await store.close();
    });

    test('createAgent twice: AGENT_EXISTS, the first spec kept', async () => {
      const store = await withAgent(open);
      await assert.rejects(
        store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'script' }), BASE),
        (e: unknown) => isBerthError(e, 'AGENT_EXISTS'),
      );
      assert.equal((await store.getAgent('sh'))?.provider, 'command');
      await store.close();
    });

    test('tenants see only their rows; archiving fences the session and fails its open messages; tokens', async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'mine', provider: 'command' }), BASE, 't1');
      await store.enqueueMessage({ sessionId: 'a', agent: 'mine', text: 'x', now: BASE, tenant: 't1' });
      await assert.rejects(
        store.enqueueMessage({ sessionId: 'b', agent: 'mine', text: 'x', now: BASE, tenant: 't2' }),
        (e: unknown) => isBerthError(e, 'AGENT_NOT_FOUND'),
      );
      assert.deepEqual(
        (await store.listAgents('t1')).map((a) => a.name),
        ['mine'],
      );
      assert.deepEqual(await store.listSessionViews(BASE, 't2'), []);
      assert.equal((await store.listSessionViews(BASE, 't1'))[0]?.id, 'a');
      assert.deepEqual(await store.eventsAfter(null, 0, 100, 't2'), []);
      assert.equal((await store.eventsAfter(null, 0, 100, 't1')).length, 1);

      const { fence, turn } = await claimAndStartTurn(store, BASE + 1);
      const archived = await store.archiveSession('a', BASE + 2, 't1');
      assert.equal(archived.status, 'archived');
      assert.equal(
        await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'late' }] }, BASE + 3),
        'stale',
      );
      assert.equal((await store.listMessages('a', 0, 10))[0]?.status, 'failed');
      await assert.rejects(
        store.enqueueMessage({ sessionId: 'a', text: 'again', now: BASE + 4 }),
        (e: unknown) => isBerthError(e, 'SESSION_ARCHIVED'),
      );
      await store.deleteAgent('mine', BASE + 5, 't1');
      assert.equal(await store.getAgent('mine'), null);

      const token = await store.insertApiToken({ id: 'tok1', tenant: 't1', hash: 'h1', label: 'ci' }, BASE);
      assert.deepEqual(await store.principalOfTokenHash('h1'), {
        tokenId: 'tok1',
        tenant: 't1',
        admin: false,
      });
      assert.equal(token.revokedAt, null);
      assert.equal(await store.revokeApiToken('tok1', BASE + 1), true);
      assert.equal(await store.principalOfTokenHash('h1'), null);
      assert.equal(await store.meanTurnMs(10), null, 'no committed turn yet');
      await store.close();
    });

    test('an event a webhook wants gets one delivery in its own transaction; an attempt is fenced by its number', async () => {
      const store = await withAgent(open);
      const hook = {
        tenant: 'default',
        agent: 'sh',
        sessionId: null,
        url: 'http://127.0.0.1:1/',
        secret: 's',
      };
      await store.createWebhook({ ...hook, id: 'wh1', events: ['reply'] }, BASE);
      await store.createWebhook({ ...hook, id: 'wh2', events: ['failed'] }, BASE);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'hi' }] }, BASE + 1);
      const taken = (await store.takeWebhookDelivery(BASE + 2, 10_000))!;
      assert.equal(taken.webhook.id, 'wh1');
      assert.equal(taken.event.type, 'reply');
      assert.equal(await store.takeWebhookDelivery(BASE + 2, 10_000), null, 'one delivery, taken');
      const attempt = { deliveryId: taken.delivery.id, statusCode: 200, error: null, durationMs: 5 };
      await store.recordWebhookAttempt(
        { ...attempt, attempt: 2, decision: { action: 'delivered' } },
        BASE + 3,
      );
      assert.deepEqual(
        await store.webhookDeliveryCounts(),
        { pending: 1, delivered: 0, dead: 0 },
        'stale attempt',
      );
      await store.recordWebhookAttempt(
        { ...attempt, attempt: 1, decision: { action: 'delivered' } },
        BASE + 3,
      );
      assert.deepEqual(await store.webhookDeliveryCounts(), { pending: 0, delivered: 1, dead: 0 });
      assert.equal((await store.listWebhookDeliveries('wh1', 0, 10))[0]?.log.length, 1);
      await store.close();
    });

    test("a turn's schedules commit with it; the agent cap holds across its sessions, in the commit", async () => {
      const store = await withAgent(open);
      const item = {
        cron: '0 9 * * *',
        tz: 'UTC',
        message: 'm',
        missed: 'once' as const,
        nextRunAt: BASE + 60_000,
      };
      await store.enqueueMessage({ sessionId: 'a', agent: 'sh', text: 'x', now: BASE });
      await store.enqueueMessage({ sessionId: 'b', agent: 'sh', text: 'x', now: BASE });
      const a = await claimAndStartTurn(store, BASE, 'w1');
      const b = await claimAndStartTurn(store, BASE, 'w2');
      const schedules = (n: number) => ({
        agent: 'sh',
        cap: 2,
        items: Array.from({ length: n }, () => item),
      });
      const commit = (t: typeof a, n: number) =>
        store.commitTurn({ ...t.fence, turnId: t.turn.id, outputs: [], schedules: schedules(n) }, BASE + 1);
      assert.equal(await commit(a, 2), 'ok');
      // Session b's turn asked while a's were still held: the commit is where the cap is decided.
      await assert.rejects(commit(b, 1), (e: unknown) => isBerthError(e, 'SCHEDULE_LIMIT'));
      assert.equal((await store.getTurn(b.turn.id))?.status, 'running', 'the refused commit wrote nothing');
      assert.deepEqual(await store.listSchedules('b'), []);
      assert.equal(await store.countAgentMadeSchedules('sh'), 2);
      const made = await store.listSchedules('a');
      assert.deepEqual(
        made.map((s) => [s.createdByTurn, s.tenant, s.nextRunAt]),
        [
          [a.turn.id, 'default', BASE + 60_000],
          [a.turn.id, 'default', BASE + 60_000],
        ],
      );
      await store.moveScheduleTo(made[0]!.id, 'cancelled', BASE + 2);
      assert.equal(await store.countAgentMadeSchedules('sh'), 1, 'a cancelled schedule frees its place');
      assert.equal(await commit(b, 1), 'ok');
      await store.close();
    });

    test('model usage sums by any subset of agent, turn and since', async () => {
      const store = await withAgent(open);
      const use = { agent: 'sh', sessionId: 's', generation: 1, provider: 'anthropic', model: 'm' };
      await store.recordModelUsage({ ...use, turnId: 't1', inputTokens: 10, outputTokens: 1 }, BASE);
      await store.recordModelUsage({ ...use, turnId: 't2', inputTokens: 20, outputTokens: 2 }, BASE + 10);
      const sum = async (f: { agent?: string; turnId?: string; since?: number }) =>
        (await store.sumModelUsage(f)).inputTokens;
      assert.equal(await sum({}), 30);
      assert.equal(await sum({ agent: 'sh' }), 30);
      assert.equal(await sum({ turnId: 't1' }), 10);
      assert.equal(await sum({ agent: 'sh', since: BASE + 5 }), 20);
      assert.equal(await sum({ agent: 'other' }), 0);
      await store.close();
    });

    test('storage grants: per agent and tenant, replaced per prefix, revoked; gone with their agent', async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'mine', provider: 'command' }), BASE, 't1');
      await store.grantStorage({ agent: 'mine', prefix: 'photos/', ops: ['read'] }, BASE, 't1');
      const replaced = await store.grantStorage(
        { agent: 'mine', prefix: 'photos/', ops: ['read', 'list'] },
        BASE + 1,
        't1',
      );
      assert.deepEqual(replaced, {
        agent: 'mine',
        prefix: 'photos/',
        ops: ['read', 'list'],
        createdAt: BASE,
      });
      await store.grantStorage({ agent: 'mine', prefix: '', ops: ['write'] }, BASE, 't1');
      assert.deepEqual(
        (await store.listStorageGrants('mine', 't1')).map((g) => g.prefix),
        ['', 'photos/'],
      );
      // One at a time: each rejection is awaited as it happens.
      for (const call of [
        () => store.grantStorage({ agent: 'mine', prefix: 'x/', ops: ['read'] }, BASE, 't2'),
        () => store.listStorageGrants('mine', 't2'),
        () => store.revokeStorageGrant('mine', 'photos/', 't2'),
      ])
        await assert.rejects(
          call(),
          (e: unknown) => isBerthError(e, 'AGENT_NOT_FOUND'),
          "another tenant's agent",
        );
      await assert.rejects(store.revokeStorageGrant('mine', 'nope/', 't1'), (e: unknown) =>
        isBerthError(e, 'GRANT_NOT_FOUND'),
      );
      await store.revokeStorageGrant('mine', 'photos/', 't1');
      assert.deepEqual(
        (await store.listStorageGrants('mine')).map((g) => g.prefix),
        [''],
      );
      await store.deleteAgent('mine', BASE + 2, 't1');
      await store.createAgent(agentSpecSchema.parse({ name: 'mine', provider: 'command' }), BASE + 3, 't2');
      assert.deepEqual(
        await store.listStorageGrants('mine', 't2'),
        [],
        'a new agent of the name starts empty',
      );
      await store.close();
    });

    test("storage objects: fenced writes in the session's agent's namespace, listed by prefix in pages", async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'other', provider: 'command' }), BASE);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      await store.enqueueMessage({ sessionId: 'o', agent: 'other', text: 'x', now: BASE + 1 });
      const { fence } = await claimAndStartTurn(store, BASE + 2);
      const { fence: otherFence } = await claimAndStartTurn(store, BASE + 2, 'w2');
      const blob = (n: number) => `${String(n).repeat(64).slice(0, 64)}.0123456789abcdef`;
      const put = (f: typeof fence, key: string, n: number) =>
        store.putStorageObject({ ...f, key, sha256: 'a'.repeat(64), size: n, blob: blob(n) }, BASE + 3);
      for (const [i, key] of ['p/1', 'p/2', 'p/3', 'p%/x', 'p_/y', 'q/1'].entries())
        assert.equal((await put(fence, key, i + 1)).code, 'ok');
      assert.equal((await put(otherFence, 'p/1', 9)).code, 'ok');

      assert.equal((await store.getStorageObject('sh', 'p/1'))?.size, 1);
      assert.equal((await store.getStorageObject('other', 'p/1'))?.size, 9, 'each agent its own namespace');
      const page = (prefix: string, after: string, limit = 10) =>
        store.listStorageObjects('sh', { prefix, after, limit }).then((rows) => rows.map((r) => r.key));
      assert.deepEqual(await page('p/', '', 2), ['p/1', 'p/2']);
      assert.deepEqual(await page('p/', 'p/2'), ['p/3']);
      assert.deepEqual(await page('p%', ''), ['p%/x'], '% in a prefix matches itself only');
      assert.deepEqual(await page('p_', ''), ['p_/y'], '_ in a prefix matches itself only');
      assert.deepEqual((await page('', '')).length, 6);

      const overwritten = await put(fence, 'p/1', 7);
      assert.equal(overwritten.code === 'ok' && overwritten.value.blob, blob(7));
      assert.equal(await store.isStorageBlobNamed(blob(7)), true);
      assert.equal(await store.isStorageBlobNamed(blob(1)), false, 'the replaced blob is garbage');

      const stale = { ...fence, generation: fence.generation - 1 };
      assert.equal((await put(stale, 'p/new', 8)).code, 'stale');
      assert.equal((await store.deleteStorageObject({ ...stale, key: 'p/2' })).code, 'stale');
      assert.equal(
        (await put({ ...fence, workerId: 'w2' }, 'p/new', 8)).code,
        'stale',
        'not the lease holder',
      );
      assert.equal(await store.getStorageObject('sh', 'p/new'), null, 'a stale put is invisible');
      assert.equal((await store.getStorageObject('sh', 'p/2'))?.size, 2, 'a stale delete removes nothing');

      assert.deepEqual(await store.deleteStorageObject({ ...fence, key: 'p/2' }), {
        code: 'ok',
        value: true,
      });
      assert.deepEqual(await store.deleteStorageObject({ ...fence, key: 'p/2' }), {
        code: 'ok',
        value: false,
      });
      await store.archiveSession('o', BASE + 5);
      await store.deleteAgent('other', BASE + 6);
      assert.equal(
        await store.getStorageObject('other', 'p/1'),
        null,
        "a deleted agent's objects go with it",
      );
      await store.close();
    });

    test('workspace chains: a commit appends its layer on the version it ran on, or writes nothing', async () => {
      const store = await withAgent(open);
      const commit = async (
        text: string,
        workspace: { baseVersion: number; layer: { key: string; size: number } | null },
      ) => {
        await store.enqueueMessage({ sessionId: 's', agent: 'sh', text, now: BASE });
        const { fence, turn } = await claimAndStartTurn(store, BASE);
        const code = await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], workspace }, BASE);
        if (code === 'ok') await store.releaseSession(fence, BASE);
        return { code, fence, turn };
      };
      assert.equal(
        (await commit('one', { baseVersion: 0, layer: { key: 'layers/a', size: 10 } })).code,
        'ok',
      );
      assert.equal(
        (await commit('read only', { baseVersion: 1, layer: null })).code,
        'ok',
        'nothing changed: no object',
      );
      const behind = await commit('stale copy', { baseVersion: 1, layer: { key: 'layers/x', size: 3 } });
      assert.equal(behind.code, 'workspace_behind');
      assert.equal((await store.getTurn(behind.turn.id))?.status, 'running', 'nothing of the refused commit');
      assert.equal((await store.getSessionView('s', BASE))?.workspaceVersion, 2);
      const layerA = {
        version: 1,
        kind: 'layer' as const,
        key: 'layers/a',
        size: 10,
        turnId: (await store.listTurns('s'))[0]!.id,
      };
      assert.deepEqual(await store.getWorkspaceChain('s'), {
        sessionId: 's',
        version: 2,
        entries: [layerA],
        history: [layerA],
      });
      assert.equal(
        (await store.listTurns('s'))
          .filter((t) => t.status === 'committed')
          .map((t) => t.baseVersion)
          .join(),
        '0,1',
      );
      await assert.rejects(store.getWorkspaceChain('ghost'), (e: unknown) =>
        isBerthError(e, 'SESSION_NOT_FOUND'),
      );
      await store.close();
    });

    test('workspace chains: a snapshot compacts the chain; a fork shares its objects and diverges', async () => {
      const store = await withAgent(open);
      for (const [i, key] of ['layers/1', 'layers/2', 'layers/3'].entries()) {
        await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: key, now: BASE });
        const { fence, turn } = await claimAndStartTurn(store, BASE);
        const state = { n: i + 1 };
        const workspace = { baseVersion: i, layer: { key, size: i + 1 } };
        assert.equal(
          await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], state, workspace }, BASE),
          'ok',
        );
        await store.releaseSession(fence, BASE);
      }
      const snapshot = (version: number, key = `snapshots/${version}`) =>
        store.recordWorkspaceSnapshot({ sessionId: 's', version, key, size: 99 }, BASE);
      assert.equal(await snapshot(4), false, 'a version not reached yet');
      assert.equal(await snapshot(2), true);
      assert.equal(await snapshot(2, 'snapshots/again'), false, 'that version is snapshotted already');
      assert.equal(await snapshot(1), false, 'older than the newest snapshot');
      const chain = await store.getWorkspaceChain('s');
      assert.deepEqual(
        chain.entries.map((e) => [e.version, e.kind, e.key]),
        [
          [2, 'snapshot', 'snapshots/2'],
          [3, 'layer', 'layers/3'],
        ],
      );
      assert.equal(await store.isWorkspaceObjectNamed('layers/1'), false, 'compacted away: garbage now');
      assert.equal(await store.isWorkspaceObjectNamed('snapshots/2'), true);

      const fork = await store.forkSession({ sourceId: 's', sessionId: 'f', now: BASE + 1 });
      assert.equal(fork.agent, 'sh');
      assert.equal(fork.workspaceVersion, 3);
      assert.deepEqual(
        (await store.getWorkspaceChain('f')).entries,
        chain.entries,
        'the same objects, not copies',
      );
      assert.deepEqual(await store.getState('f'), { n: 3 });
      // The fork diverges: its own commit appends to its own chain only.
      await store.enqueueMessage({ sessionId: 'f', text: 'own', now: BASE + 1 });
      const { fence, turn } = await claimAndStartTurn(store, BASE + 1);
      const workspace = { baseVersion: 3, layer: { key: 'layers/f4', size: 4 } };
      assert.equal(
        await store.commitTurn(
          { ...fence, turnId: turn.id, outputs: [], state: { n: 40 }, workspace },
          BASE + 1,
        ),
        'ok',
      );
      assert.equal((await store.getWorkspaceChain('s')).entries.length, 2);
      assert.deepEqual(await store.getState('s'), { n: 3 });
      assert.equal((await store.getWorkspaceChain('f')).entries.at(-1)?.key, 'layers/f4');
      // Compacting the source leaves what the fork still names.
      assert.equal(await snapshot(3), true);
      assert.equal(await store.isWorkspaceObjectNamed('layers/3'), true, 'the fork still names it');
      const refusals = [
        { input: { sourceId: 'ghost', sessionId: 'g', now: BASE }, code: 'SESSION_NOT_FOUND' as const },
        { input: { sourceId: 's', sessionId: 'f', now: BASE }, code: 'SESSION_EXISTS' as const },
        {
          input: { sourceId: 's', sessionId: 'g', now: BASE, tenant: 'other' },
          code: 'SESSION_NOT_FOUND' as const,
        },
      ];
      for (const r of refusals)
        await assert.rejects(store.forkSession(r.input), (e: unknown) => isBerthError(e, r.code), r.code);
      await store.archiveSession('s', BASE + 2);
      await assert.rejects(
        store.forkSession({ sourceId: 's', sessionId: 'h', now: BASE + 2 }),
        (e: unknown) => isBerthError(e, 'SESSION_ARCHIVED'),
      );
      await store.close();
    });

    test('sandbox records: the latest report wins, a tenant sees its own, dead workers’ sandboxes are lost', async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'mine', provider: 'command' }), BASE, 't1');
      await store.enqueueMessage({ sessionId: 's1', agent: 'mine', text: 'x', now: BASE, tenant: 't1' });
      const record = (name: string, p: Partial<SandboxRecord>): SandboxRecord => ({
        name,
        workerId: 'w1',
        phase: 'warm',
        pooled: true,
        sessionId: null,
        generation: null,
        turnId: null,
        endReason: null,
        endMessage: null,
        createdAt: BASE,
        updatedAt: BASE,
        endedAt: null,
        ...p,
      });
      const serving = record('sb-a', {
        phase: 'serving',
        sessionId: 's1',
        generation: 1,
        turnId: 't',
        updatedAt: BASE + 2,
      });
      // The API's read for an operation on a live sandbox: the session's lease, with its worker's
      // control endpoint; the sandbox's record may lag (phase null) but never makes it up.
      assert.equal(await store.liveSandboxOf('s1'), null, 'not leased');
      const control = { url: 'http://127.0.0.1:7001', key: 'k'.repeat(64) };
      await store.registerWorker({
        id: 'w1',
        host: 'h',
        pid: 1,
        slots: 1,
        heartbeatAt: BASE + 2,
        startedAt: BASE,
        control,
      });
      const claim = await store.claimRunnableSession('w1', BASE + 2);
      const fence = { sessionId: 's1', generation: claim!.session.generation, workerId: 'w1' };
      assert.equal(await store.recordSandbox(fence, 'sb-a', BASE + 2), 'ok');
      const liveBefore = {
        name: 'sb-a',
        workerId: 'w1',
        generation: fence.generation,
        phase: null,
        control,
        workerHeartbeatAt: BASE + 2,
      };
      assert.deepEqual(await store.liveSandboxOf('s1'), liveBefore, 'leased; no record yet');
      await store.recordSandboxes([record('sb-warm', {}), serving], BASE + 2);
      // A report that arrives late (an older move) does not undo a newer one.
      await store.recordSandboxes(
        [record('sb-a', { phase: 'bound', sessionId: 's1', generation: 1, updatedAt: BASE + 1 })],
        BASE + 3,
      );
      assert.deepEqual(
        await store.liveSandboxOf('s1'),
        { ...liveBefore, phase: 'serving' },
        'its record reported: the phase with it',
      );
      const all = await store.listSandboxes(BASE, 100);
      assert.deepEqual(all.map((r) => [r.name, r.phase]).sort(), [
        ['sb-a', 'serving'],
        ['sb-warm', 'warm'],
      ]);
      assert.deepEqual(
        all.find((r) => r.name === 'sb-a'),
        serving,
      );
      assert.deepEqual(
        (await store.listSandboxes(BASE, 100, 't1')).map((r) => r.name),
        ['sb-a'],
        'a warm sandbox serves no tenant',
      );
      assert.deepEqual(await store.listSandboxes(BASE, 100, 't2'), []);
      const gone = record('sb-a', {
        phase: 'gone',
        sessionId: 's1',
        generation: 1,
        endReason: 'SandboxExited',
        endMessage: 'sandbox exited (exit code 137)',
        updatedAt: BASE + 4,
        endedAt: BASE + 4,
      });
      await store.recordSandboxes([gone], BASE + 4);
      assert.equal(
        await store.liveSandboxOf('s1'),
        null,
        'its sandbox is recorded gone: nothing live is bound',
      );
      assert.deepEqual(
        (await store.listSandboxes(BASE + 4, 100)).find((r) => r.name === 'sb-a'),
        gone,
      );
      assert.equal(
        (await store.listSandboxes(BASE + 5, 100)).find((r) => r.name === 'sb-a'),
        undefined,
        'ended before the window',
      );
      // w2 stops renewing: once its row is a lease old, its sandboxes are recorded lost with the next report.
      await store.recordSandboxes([record('sb-w2', { workerId: 'w2' })], BASE + 5);
      await store.renewWorker('w1', BASE + LEASE_MS + 10);
      await store.recordSandboxes([], BASE + LEASE_MS + 10);
      const lost = (await store.listSandboxes(BASE, 100)).find((r) => r.name === 'sb-w2');
      assert.deepEqual(
        [lost?.phase, lost?.endReason, lost?.endedAt],
        ['gone', 'WorkerLost', BASE + LEASE_MS + 10],
      );
      assert.equal(
        (await store.listSandboxes(BASE, 100)).find((r) => r.name === 'sb-warm')?.phase,
        'warm',
        'w1 is alive',
      );
      await store.close();
    });

    test('a turn record: its attempts, the messages they took, its replies and the state it still holds', async () => {
      const store = await withAgent(open);
      const one = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      const first = await claimAndStartTurn(store, BASE);
      const aborted = { turnId: first.turn.id, code: 'SANDBOX_EXITED' as const, error: 'killed' };
      assert.equal(await store.abortTurn({ ...first.fence, ...aborted }, BASE + 1), 'ok');
      const due = BASE + 1 + RETRY.retryBaseMs;
      const retry = await store.startTurn(first.fence, due);
      const turn = retry.code === 'ok' && retry.value ? retry.value.turn : assert.fail('no retry');
      const state = { kept: 1, replaced: 'a', dropped: true };
      const outputs = [{ text: 'done' }];
      assert.equal(
        await store.commitTurn({ ...first.fence, turnId: turn.id, outputs, state }, due + 1),
        'ok',
      );
      await store.enqueueMessage({ sessionId: 's', text: 'two', now: due + 2 });
      const next = await store.startTurn(first.fence, due + 2);
      const later = next.code === 'ok' && next.value ? next.value.turn : assert.fail('no next turn');
      const overwrite = { replaced: 'b', dropped: null };
      assert.equal(
        await store.commitTurn({ ...first.fence, turnId: later.id, outputs: [], state: overwrite }, due + 3),
        'ok',
      );
      const record = await store.getTurnRecord('s', turn.id);
      assert.deepEqual(
        record?.attempts.map((t) => [t.id, t.status, t.errorCode]),
        [
          [first.turn.id, 'aborted', 'SANDBOX_EXITED'],
          [turn.id, 'committed', null],
        ],
      );
      assert.deepEqual(
        record?.messages.map((m) => [m.id, m.status]),
        [[one.message.id, 'done']],
      );
      assert.deepEqual(
        record?.replies.map((m) => [m.text, m.inReplyTo]),
        [['done', [one.message.id]]],
      );
      assert.deepEqual(
        record?.state,
        { kept: 1 },
        "keys a later turn put or deleted are not this turn's any more",
      );
      assert.equal((await store.getTurnRecord('s', first.turn.id))?.replies.length, 0);
      assert.equal(await store.getTurnRecord('other', turn.id), null, "another session's turn is not found");
      assert.equal(await store.getTurnRecord('s', 'turn_none'), null);
      await store.close();
    });

    test('notifications follow the committed transaction', async () => {
      const store = await withAgent(open);
      const seen: string[] = [];
      const off = store.onChange((c) => seen.push(c.type === 'event' ? `event:${c.event.type}` : c.type));
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'x', now: BASE });
      await assert.rejects(store.enqueueMessage({ sessionId: 'z', agent: 'ghost', text: 'x', now: BASE }));
      off();
      assert.deepEqual(seen, ['enqueued', 'event:queued']);
      await store.close();
    });
  });
}
