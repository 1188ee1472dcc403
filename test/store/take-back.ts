/**
 * Conformance of what a client takes back, run against SQLite and PostgreSQL by
 * store.conformance.test.ts: a queued message is cancelled (also one waiting out a retry)
 * and the ones behind it run next; a message a turn took is not; an interrupt is recorded on
 * the running turn, after which its commit is refused and any abort of it (its worker's, the
 * sweep's) ends it and its messages interrupted; and an interrupt racing a commit leaves
 * exactly one outcome.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentSpecSchema, isBerthError, type Turn } from '../../src/core/index.js';
import type { Fence, Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, LEASE_MS, type OpenStore, withAgent } from './conformance.js';

const code = (c: string) => (e: unknown) => isBerthError(e) && e.code === c;

async function statuses(store: Store, sessionId: string): Promise<Record<string, string>> {
  const messages = await store.listMessages(sessionId, 0, 100);
  return Object.fromEntries(messages.filter((m) => m.direction === 'in').map((m) => [m.text, m.status]));
}

async function eventTypes(store: Store, sessionId: string): Promise<string[]> {
  return (await store.eventsAfter(sessionId, 0, 1000)).map((e) => e.type);
}

export function runTakeBackConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, cancel and interrupt: ${kind}`, () => {
    test('a queued message is cancelled, never run; the one behind it runs next', async () => {
      const store = await withAgent(open);
      const one = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 1 });
      const cancelled = await store.cancelMessage({
        sessionId: 's',
        messageId: one.message.id,
        now: BASE + 2,
      });
      assert.equal(cancelled.status, 'cancelled');
      // Again: the same answer, nothing more written.
      const again = await store.cancelMessage({ sessionId: 's', messageId: one.message.id, now: BASE + 3 });
      assert.equal(again.status, 'cancelled');
      assert.equal((await eventTypes(store, 's')).filter((t) => t === 'cancelled').length, 1);
      const view = await store.getSessionView('s', BASE + 3);
      assert.equal(view?.pending, 1);
      assert.equal(view?.status, 'queued');
      const { turn } = await claimAndStartTurn(store, BASE + 4);
      const taken = await store.listMessages('s', 0, 10);
      assert.deepEqual(
        turn.messageIds,
        taken.filter((m) => m.text === 'two').map((m) => m.id),
        'the turn took only the message behind the cancelled one',
      );
      assert.deepEqual(await statuses(store, 's'), { one: 'cancelled', two: 'processing' });
    });

    test('a message waiting out a retry can be cancelled; the next one is runnable at once', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const two = await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 1 });
      const abort = { ...fence, turnId: turn.id, code: 'TURN_FAILED' as const, error: 'the agent failed the turn' };
      assert.equal(await store.abortTurn(abort, BASE + 2), 'ok');
      assert.equal(await store.releaseSession(fence, BASE + 3), 'ok');
      assert.equal((await store.getSessionView('s', BASE + 3))?.status, 'backoff', 'one holds two');
      await store.cancelMessage({ sessionId: 's', messageId: turn.messageIds[0]!, now: BASE + 4 });
      const view = await store.getSessionView('s', BASE + 4);
      assert.equal(view?.status, 'queued', 'two no longer waits for the cancelled one');
      const next = await claimAndStartTurn(store, BASE + 5);
      assert.deepEqual(next.turn.messageIds, [two.message.id]);
      assert.deepEqual(await statuses(store, 's'), { one: 'cancelled', two: 'processing' });
    });

    test('a message a turn took, or one answered, is not cancelled (409); others are not found', async () => {
      const store = await withAgent(open);
      const one = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const id = one.message.id;
      await assert.rejects(
        store.cancelMessage({ sessionId: 's', messageId: id, now: BASE + 1 }),
        (e: unknown) =>
          code('MESSAGE_NOT_PENDING')(e) && /Current state: processing/.test((e as Error).message),
      );
      assert.equal(
        await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'ok' }] }, BASE + 2),
        'ok',
      );
      await assert.rejects(
        store.cancelMessage({ sessionId: 's', messageId: id, now: BASE + 3 }),
        code('MESSAGE_NOT_PENDING'),
      );
      const reply = (await store.listMessages('s', 0, 10)).find((m) => m.direction === 'out')!;
      await assert.rejects(
        store.cancelMessage({ sessionId: 's', messageId: reply.id, now: BASE + 3 }),
        code('MESSAGE_NOT_FOUND'),
        'a reply is not taken back',
      );
      await store.enqueueMessage({ sessionId: 'other', agent: 'sh', text: 'x', now: BASE + 4 });
      await assert.rejects(
        store.cancelMessage({ sessionId: 'other', messageId: id, now: BASE + 5 }),
        code('MESSAGE_NOT_FOUND'),
        "another session's message",
      );
      await assert.rejects(
        store.cancelMessage({ sessionId: 'nope', messageId: id, now: BASE + 5 }),
        code('SESSION_NOT_FOUND'),
      );
    });

    test("another tenant's session looks absent to cancel and interrupt", async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'acme-sh', provider: 'command' }), BASE, 'acme');
      const m = await store.enqueueMessage({
        sessionId: 's',
        agent: 'acme-sh',
        text: 'one',
        now: BASE,
        tenant: 'acme',
      });
      await assert.rejects(
        store.cancelMessage({ sessionId: 's', messageId: m.message.id, now: BASE + 1, tenant: 'globex' }),
        code('SESSION_NOT_FOUND'),
      );
      await claimAndStartTurn(store, BASE + 1);
      await assert.rejects(
        store.requestInterrupt({ sessionId: 's', now: BASE + 2, tenant: 'globex' }),
        code('SESSION_NOT_FOUND'),
      );
      const turn = await store.requestInterrupt({ sessionId: 's', now: BASE + 2, tenant: 'acme' });
      assert.equal(turn.interruptRequestedAt, BASE + 2);
    });

    test('interrupt: recorded on the running turn; its commit is refused; its abort ends it and its messages interrupted', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      await assert.rejects(store.requestInterrupt({ sessionId: 's', now: BASE }), code('NO_RUNNING_TURN'));
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 1 });
      const heard: string[] = [];
      const off = store.onChange((c) => {
        if (c.type === 'interrupt') heard.push(`${c.sessionId}@${c.leaseOwner}`);
      });
      await assert.rejects(
        store.requestInterrupt({ sessionId: 's', turnId: 'turn_other', now: BASE + 2 }),
        code('NO_RUNNING_TURN'),
        'a request naming another turn',
      );
      const asked = await store.requestInterrupt({ sessionId: 's', turnId: turn.id, now: BASE + 2 });
      assert.equal(asked.status, 'running');
      assert.equal(asked.interruptRequestedAt, BASE + 2);
      // Asking again changes nothing: the first request stands.
      assert.equal(
        (await store.requestInterrupt({ sessionId: 's', now: BASE + 3 })).interruptRequestedAt,
        BASE + 2,
      );
      off();
      assert.deepEqual(heard, ['s@w1'], 'its lease holder is told once');
      assert.equal(
        await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'late' }] }, BASE + 4),
        'interrupted',
      );
      assert.equal((await store.getTurn(turn.id))?.status, 'running', 'nothing of the commit was written');
      // The runner's own abort (its job was killed) ends it interrupted all the same.
      const abort = { ...fence, turnId: turn.id, code: 'TURN_FAILED' as const, error: 'killed' };
      assert.equal(await store.abortTurn(abort, BASE + 5), 'ok');
      const ended = (await store.getTurn(turn.id))!;
      assert.equal(ended.status, 'interrupted');
      assert.equal(ended.errorCode, 'TURN_INTERRUPTED');
      const msgs = await store.listMessages('s', 0, 10);
      assert.equal(msgs.find((m) => m.text === 'one')?.status, 'interrupted');
      assert.equal(msgs.find((m) => m.text === 'one')?.errorCode, 'TURN_INTERRUPTED');
      assert.equal(msgs.filter((m) => m.direction === 'out').length, 0, 'no reply');
      const types = await eventTypes(store, 's');
      assert.ok(types.includes('interrupting') && types.includes('interrupted'), types.join());
      assert.ok(!types.includes('retrying'));
      // The session goes on with its next message, at once: nothing waits out a backoff.
      const next = await store.startTurn(fence, BASE + 6);
      assert.ok(next.code === 'ok' && next.value);
      assert.deepEqual(
        next.value.messages.map((m) => m.text),
        ['two'],
      );
      await assert.rejects(
        store.requestInterrupt({ sessionId: 's', turnId: turn.id, now: BASE + 7 }),
        (e: unknown) => code('NO_RUNNING_TURN')(e) && /is interrupted/.test((e as Error).message),
      );
    });

    test('interrupt: a turn whose worker died meanwhile is interrupted by the sweep, not retried', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      const { turn } = await claimAndStartTurn(store, BASE);
      await store.requestInterrupt({ sessionId: 's', now: BASE + 1 });
      await store.renewWorker('w2', BASE + LEASE_MS + 1);
      assert.deepEqual(await store.reclaimExpiredLeases(BASE + LEASE_MS + 1), ['s']);
      assert.equal((await store.getTurn(turn.id))?.status, 'interrupted');
      assert.deepEqual(await statuses(store, 's'), { one: 'interrupted' });
    });

    test('interrupt racing commit: exactly one outcome, decided by the store', async () => {
      const store = await withAgent(open);
      const outcomes = { committed: 0, interrupted: 0 };
      for (let i = 0; i < 16; i++) {
        const sessionId = `race${i}`;
        const now = BASE + i * 100;
        await store.enqueueMessage({ sessionId, agent: 'sh', text: 'go', now });
        const claim = await store.claimRunnableSession('w1', now);
        assert.equal(claim?.session.id, sessionId);
        const fence: Fence = { sessionId, generation: claim!.session.generation, workerId: 'w1' };
        const started = await store.startTurn(fence, now);
        const turn: Turn =
          started.code === 'ok' && started.value ? started.value.turn : assert.fail('no turn');
        const commit = () =>
          store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'done' }] }, now + 1);
        const interrupt = () => store.requestInterrupt({ sessionId, now: now + 1 });
        // Both orders of issue, sent together: on PostgreSQL they contend for the session row.
        const [c, r] =
          i % 2 === 0
            ? await Promise.allSettled([commit(), interrupt()])
            : await Promise.allSettled([interrupt(), commit()]).then(([a, b]) => [b, a] as const);
        assert.equal(c.status, 'fulfilled');
        const committed = c.status === 'fulfilled' && c.value === 'ok';
        if (committed) {
          assert.ok(
            r.status === 'rejected' && code('NO_RUNNING_TURN')(r.reason),
            'the interrupt found it committed',
          );
          outcomes.committed += 1;
        } else {
          assert.equal(c.status === 'fulfilled' && c.value, 'interrupted');
          assert.equal(r.status, 'fulfilled', 'the interrupt was recorded first');
          // The worker's abort, as the supervisor makes it once it saw the request.
          const abort = {
            ...fence,
            turnId: turn.id,
            code: 'TURN_INTERRUPTED' as const,
            error: 'interrupted',
          };
          assert.equal(await store.abortTurn(abort, now + 2), 'ok');
          outcomes.interrupted += 1;
        }
        const ended = (await store.getTurn(turn.id))!;
        const replies = (await store.listMessages(sessionId, 0, 10)).filter((m) => m.direction === 'out');
        const [message] = (await store.listMessages(sessionId, 0, 10)).filter((m) => m.direction === 'in');
        if (committed) {
          assert.equal(ended.status, 'committed');
          assert.equal(ended.interruptRequestedAt, null);
          assert.equal(replies.length, 1);
          assert.equal(message?.status, 'done');
        } else {
          assert.equal(ended.status, 'interrupted');
          assert.equal(replies.length, 0);
          assert.equal(message?.status, 'interrupted');
        }
        assert.equal(await store.releaseSession(fence, now + 3), 'ok');
      }
      assert.equal(outcomes.committed + outcomes.interrupted, 16);
    });
  });
}
