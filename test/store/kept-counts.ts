/**
 * Conformance of the counts the store keeps (sessionCounts) and of the paged session
 * listing, run against SQLite and PostgreSQL by store.conformance.test.ts: after each of
 * many transitions (enqueue, claim, start, commit, retry, dead letter, cancel, interrupt,
 * hold, lease expiry, archive, fork), in two tenants, the kept counts equal a full recount
 * of what the store lists; and the pages of the listing, cursor after cursor, are the full
 * listing, in order.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentSpecSchema, BY_CREATION, type SessionCounts } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, LEASE_MS, type OpenStore, withAgent } from './conformance.js';

/** The counts, recounted from every session's view, messages and turns. */
async function recount(store: Store, now: number, tenant?: string): Promise<SessionCounts> {
  const views = await store.listSessionViews(now, tenant);
  const counts: SessionCounts = {
    sessions: views.length,
    archived: views.filter((v) => v.archivedAt !== null).length,
    held: views.filter((v) => v.hold !== null).length,
    leased: views.filter((v) => v.leaseOwner !== null).length,
    bound: views.filter((v) => v.sandbox !== null).length,
    waiting: 0,
    runningTurns: 0,
    messages: { pending: 0, processing: 0, failed: 0 },
  };
  for (const v of views) {
    const inbound = (await store.listMessages(v.id, 0, 1000)).filter((m) => m.direction === 'in');
    for (const status of ['pending', 'processing', 'failed'] as const)
      counts.messages[status] += inbound.filter((m) => m.status === status).length;
    // A held session keeps its messages pending out of the queue.
    if (v.hold === null && inbound.some((m) => m.status === 'pending')) counts.waiting++;
    counts.runningTurns += (await store.listTurns(v.id)).filter((t) => t.status === 'running').length;
  }
  return counts;
}

async function assertKept(store: Store, now: number, after: string): Promise<void> {
  for (const tenant of [undefined, 'default', 't2'])
    assert.deepEqual(
      await store.sessionCounts(tenant),
      await recount(store, now, tenant),
      `kept counts of ${tenant ?? 'every tenant'} after ${after}`,
    );
}

const enqueue = (store: Store, sessionId: string, now: number) =>
  store.enqueueMessage({ sessionId, agent: 'sh', text: sessionId, now });

export function runKeptCountsConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, kept counts and the paged listing: ${kind}`, () => {
    test('the kept counts equal a full recount after every kind of transition', async () => {
      const store = await withAgent(open);
      await store.createAgent(agentSpecSchema.parse({ name: 'mine', provider: 'command' }), BASE, 't2');
      let now = BASE;
      const step = () => ++now;
      /** Time passes; the workers stay alive. */
      const wait = async (ms: number) => {
        now += ms;
        for (const id of ['w1', 'w2']) await store.renewWorker(id, now);
      };
      for (const id of ['a', 'b', 'c', 'd', 'e']) await enqueue(store, id, step());
      await enqueue(store, 'a', step());
      await assertKept(store, now, 'enqueue');

      // a: claimed, started (its two messages processing), committed, released.
      const a = await claimAndStartTurn(store, step());
      await store.recordSandbox(a.fence, 'sb-a', step());
      await assertKept(store, now, 'claim and start');
      assert.equal(
        await store.commitTurn({ ...a.fence, turnId: a.turn.id, outputs: [{ text: 'ok' }] }, step()),
        'ok',
      );
      assert.equal(await store.releaseSession(a.fence, step()), 'ok');
      await assertKept(store, now, 'commit and release');

      // b: aborted until its message is a dead letter (3 tries), through its backoffs.
      for (let tries = 0; tries < 3; tries++) {
        await wait(120_000);
        const b = await claimAndStartTurn(store, step());
        const abort = { ...b.fence, turnId: b.turn.id, code: 'SANDBOX_EXITED' as const, error: 'gone' };
        assert.equal(await store.abortTurn(abort, step()), 'ok');
        assert.equal(await store.releaseSession(b.fence, step()), 'ok');
        await assertKept(store, now, `abort ${tries + 1}`);
      }

      await wait(120_000);
      // c: one message taken back; its turn of the other interrupted.
      const second = await enqueue(store, 'c', step());
      await store.cancelMessage({ sessionId: 'c', messageId: second.message.id, now: step() });
      await assertKept(store, now, 'cancel');
      const c = await claimAndStartTurn(store, step());
      await store.requestInterrupt({ sessionId: 'c', turnId: c.turn.id, now: step() });
      const refused = await store.commitTurn(
        { ...c.fence, turnId: c.turn.id, outputs: [{ text: 'no' }] },
        step(),
      );
      assert.equal(refused, 'interrupted');
      await assertKept(store, now, 'interrupt');

      // d: held (its resident workspace lost), then let go.
      const d = await claimAndStartTurn(store, step());
      const lost = { ...d.fence, turnId: d.turn.id, code: 'RESIDENT_WORKSPACE_LOST' as const, error: 'lost' };
      assert.equal(await store.abortTurn(lost, step()), 'ok');
      await assertKept(store, now, 'hold');
      await store.releaseHold({ sessionId: 'd', resetWorkspace: false, now: step() });
      await assertKept(store, now, 'release of the hold');

      // e: its worker dies mid-turn; the sweep takes it back.
      await claimAndStartTurn(store, step(), 'w2');
      // The other tenant's session waits behind no one: enqueued once every claim above is made,
      // since the fair share between tenants would otherwise have it claimed among them.
      await store.enqueueMessage({ sessionId: 'x', agent: 'mine', text: 'x', now: step(), tenant: 't2' });
      await assertKept(store, now, 'enqueue in a second tenant');
      now += LEASE_MS * 3;
      await store.renewWorker('w1', now);
      assert.ok((await store.reclaimExpiredLeases(step())).includes('e'));
      await assertKept(store, now, 'lease expiry');

      // Archived with pending messages; a fork of a committed session.
      await store.archiveSession('e', step());
      await store.forkSession({ sourceId: 'a', sessionId: 'f', now: step() });
      await assertKept(store, now, 'archive and fork');
      const all = await store.sessionCounts();
      assert.equal(all.sessions, 7, 'a to f, and x');
      assert.equal((await store.sessionCounts('t2')).messages.pending, 1);
    });

    test('the pages of the listing, cursor after cursor, are the whole listing in order', async () => {
      const store = await withAgent(open);
      for (let i = 0; i < 7; i++) await enqueue(store, `s${i}`, BASE + (i % 3));
      const whole = await store.listSessionViews(BASE + 10);
      const paged: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await store.listSessionViews(BASE + 10, undefined, { after, limit: 3 });
        paged.push(...page.map((v) => v.id));
        if (page.length < 3) break;
        const last = page.at(-1)!;
        after = BY_CREATION.cursorOf(last);
      }
      assert.deepEqual(
        paged,
        whole.map((v) => v.id),
      );
      const first = await store.listSessionViews(BASE + 10, undefined, { limit: 3 });
      assert.deepEqual(
        first.map((v) => v.queuePosition),
        whole.slice(0, 3).map((v) => v.queuePosition),
        'a page shows the same queue positions',
      );
    });
  });
}
