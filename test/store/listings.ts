/**
 * Conformance of the keyset-paginated listings, run against SQLite and PostgreSQL by
 * store.conformance.test.ts: for every listing (agents, turns, tokens, schedules, webhooks,
 * channels, a channel's outbox, grants, the claim queue), the pages, cursor after cursor,
 * are the whole listing in order, each row once, across page boundaries (rows sharing a
 * time, so the id breaks the tie); a tenant's pages hold only its rows; a page reads at most
 * its limit; a cursor the listing did not give is INVALID_INPUT.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  agentSpecSchema,
  BY_CLAIM,
  BY_CREATION,
  BY_NAME,
  BY_PREFIX,
  BY_SEQ,
  BY_START,
  BY_TOKEN_CREATION,
  isBerthError,
  type Keyset,
  nextCursor,
  type PageRequest,
} from '../../src/core/index.js';
import { CHANNEL, update } from './channels.js';
import { BASE, claimAndStartTurn, LEASE_MS, type OpenStore, withAgent } from './conformance.js';

const LIMIT = 2;
/** More than any listing here needs: a listing whose pages never end fails, not hangs. */
const MAX_PAGES = 20;

/** Every page of a listing, following `next` until it is null. */
async function pages<T>(read: (page: PageRequest) => Promise<T[]>, keys: Keyset<NoInfer<T>>): Promise<T[][]> {
  const out: T[][] = [];
  let after: string | undefined;
  for (;;) {
    assert.ok(out.length < MAX_PAGES, 'the pages end');
    const page = await read({ ...(after === undefined ? {} : { after }), limit: LIMIT });
    assert.ok(page.length <= LIMIT, 'a page holds at most its limit');
    out.push(page);
    const next = nextCursor(page, LIMIT, keys);
    if (next === null) return out;
    after = next;
  }
}

/** The pages of a listing are its whole (unpaged) listing, in order, over more than one page. */
async function assertPaged<T>(
  what: string,
  read: (page?: PageRequest) => Promise<T[]>,
  keys: Keyset<NoInfer<T>>,
  id: (item: T) => string | number,
): Promise<T[]> {
  const whole = await read();
  const paged = await pages(read, keys);
  assert.ok(paged.length > 1, `${what}: more than one page`);
  assert.deepEqual(paged.flat().map(id), whole.map(id), `${what}: the pages are the whole listing, in order`);
  return whole;
}

const spec = (name: string) => agentSpecSchema.parse({ name, provider: 'command' });

export function runListingConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, paged listings: ${kind}`, () => {
    test('every listing pages through all its rows once, in order, scoped to its tenant', async () => {
      const store = await withAgent(open);
      for (const name of ['b', 'd', 'a', 'c']) await store.createAgent(spec(name), BASE);
      for (const name of ['bb', 'aa']) await store.createAgent(spec(name), BASE, 't2');
      const agents = await assertPaged(
        'agents',
        (p) => store.listAgents('default', p),
        BY_NAME,
        (a) => a.name,
      );
      assert.deepEqual(
        agents.map((a) => a.name),
        ['a', 'b', 'c', 'd', 'sh'],
      );
      await assertPaged(
        'every agent',
        (p) => store.listAgents(undefined, p),
        BY_NAME,
        (a) => a.name,
      );
      assert.deepEqual(
        (await pages((p) => store.listAgents('t2', p), BY_NAME)).flat().map((a) => a.name),
        ['aa', 'bb'],
        "a tenant's pages hold its agents only",
      );

      for (const prefix of ['x/', '', 'a/', 'm/'])
        await store.grantStorage({ agent: 'sh', prefix, ops: ['read'] }, BASE);
      const grants = await assertPaged(
        'grants',
        (p) => store.listStorageGrants('sh', undefined, p),
        BY_PREFIX,
        (g) => g.prefix,
      );
      assert.equal(grants[0]?.prefix, '', 'the whole-namespace grant is on the first page');

      for (let i = 0; i < 5; i++)
        await store.insertApiToken(
          { id: `tok${4 - i}`, tenant: 'default', hash: `h${i}`, label: '' },
          BASE + (i % 2),
        );
      await assertPaged(
        'tokens',
        (p) => store.listApiTokens(p),
        BY_TOKEN_CREATION,
        (t) => t.tokenId,
      );

      const hook = {
        agent: 'sh',
        sessionId: null,
        url: 'http://127.0.0.1:1/',
        secret: 's',
        events: ['reply'],
      };
      for (let i = 0; i < 5; i++)
        await store.createWebhook({ ...hook, id: `wh${4 - i}`, tenant: 'default' }, BASE);
      await store.createWebhook({ ...hook, agent: 'aa', id: 'wh-t2', tenant: 't2' }, BASE);
      const hooks = await assertPaged(
        'webhooks',
        (p) => store.listWebhooks('default', p),
        BY_CREATION,
        (w) => w.id,
      );
      assert.ok(!hooks.some((w) => w.id === 'wh-t2'), "another tenant's webhook is not listed");

      const schedule = {
        cron: '0 9 * * *',
        tz: 'UTC',
        message: 'go',
        missed: 'skip' as const,
        nextRunAt: BASE + 60_000,
      };
      for (let i = 0; i < 5; i++)
        await store.createSchedule({ ...schedule, sessionId: 'sched', agent: 'sh' }, BASE + (i % 2));
      await assertPaged(
        'schedules',
        (p) => store.listSchedules('sched', undefined, p),
        BY_CREATION,
        (s) => s.id,
      );
      await assertPaged(
        'every schedule',
        (p) => store.listSchedules(null, 'default', p),
        BY_CREATION,
        (s) => s.id,
      );
      assert.deepEqual(
        await store.listSchedules(null, 't2', { limit: LIMIT }),
        [],
        "another tenant's schedules",
      );

      for (let i = 0; i < 3; i++) await store.createChannel({ ...CHANNEL, id: `ch${2 - i}` }, BASE);
      await assertPaged(
        'channels',
        (p) => store.listChannels('default', p),
        BY_CREATION,
        (c) => c.id,
      );
      assert.deepEqual(await store.listChannels('t2', { limit: LIMIT }), [], "another tenant's channels");
      // Sends owed to the chat: a failure notice for every message its archived session refuses.
      assert.equal(await store.takeChannelLease('ch0', 'p1', BASE, LEASE_MS), true);
      await store.commitChannelInbound('ch0', 'p1', update(1), BASE);
      const [chatSession] = (await store.listSessionViews(BASE)).filter((s) => s.id.includes('ch0'));
      await store.archiveSession(chatSession!.id, BASE + 1);
      for (let i = 2; i <= 6; i++) await store.commitChannelInbound('ch0', 'p1', update(i), BASE + i);
      await assertPaged(
        'outbox',
        (p) => store.listChannelOutbox('ch0', p),
        BY_SEQ,
        (o) => o.id,
      );

      // Turns: tried, aborted, retried once its backoff is over.
      await store.enqueueMessage({ sessionId: 'turns', agent: 'sh', text: 'x', now: BASE });
      let now = BASE;
      for (let i = 0; i < 3; i++) {
        const { fence, turn } = await claimAndStartTurn(store, now);
        assert.equal(
          await store.abortTurn({ ...fence, turnId: turn.id, error: 'x', code: 'SANDBOX_EXITED' }, now),
          'ok',
        );
        await store.releaseSession(fence, now);
        now += 120_000;
        await store.renewWorker('w1', now);
      }
      await assertPaged(
        'turns',
        (p) => store.listTurns('turns', p),
        BY_START,
        (t) => t.id,
      );

      for (const read of [
        () => store.listAgents(undefined, { after: 'bm9wZQ', limit: 1 }),
        () => store.listApiTokens({ after: BY_NAME.cursorOf({ name: 'a' }), limit: 1 }),
        () => store.listChannelOutbox('ch0', { after: '!!', limit: 1 }),
      ])
        await assert.rejects(read(), (e: unknown) => isBerthError(e, 'INVALID_INPUT'));
      await store.close();
    });

    test('a page of the claim queue reads at most its limit of sessions, in claim order, with global positions', async () => {
      const store = await withAgent(open);
      await store.createAgent(spec('other'), BASE, 't2');
      await store.insertApiToken({ id: 't2', tenant: 't2', hash: 'h', label: '', weight: 2 }, BASE);
      for (let i = 0; i < 7; i++)
        await store.enqueueMessage({ sessionId: `a${i}`, agent: 'sh', text: 'x', now: BASE });
      for (let i = 0; i < 5; i++)
        await store.enqueueMessage({ sessionId: `b${i}`, agent: 'other', text: 'x', now: BASE });
      // One claim, so the shares have moved on from where they started.
      await store.claimRunnableSession('w1', BASE + 1);
      const now = BASE + 2;
      const positions = await store.queuePositions(now);
      const inOrder = [...positions].sort((x, y) => x[1] - y[1]).map(([id]) => id);
      const queue = await assertPaged(
        'queue',
        (p) => store.listQueue(now, undefined, p),
        BY_CLAIM,
        (q) => q.sessionId,
      );
      assert.deepEqual(
        queue.map((q) => [q.sessionId, q.position, q.pending]),
        inOrder.map((id) => [id, positions.get(id), 1]),
        'the claim order and positions the change feed shows',
      );
      const mine = await assertPaged(
        't2 queue',
        (p) => store.listQueue(now, 't2', p),
        BY_CLAIM,
        (q) => q.sessionId,
      );
      assert.deepEqual(
        mine.map((q) => [q.sessionId, q.position]),
        inOrder.filter((id) => id.startsWith('b')).map((id) => [id, positions.get(id)]),
        "a tenant's own queued sessions, with their global positions",
      );
      const first = await store.listQueue(now, undefined, { limit: 3 });
      assert.deepEqual(
        first.map((q) => q.sessionId),
        inOrder.slice(0, 3),
      );
      // The session after the cursor is claimed meanwhile: the next page goes on from the cursor.
      const after = BY_CLAIM.cursorOf(first.at(-1)!);
      await store.claimRunnableSession('w2', now);
      const rest = (
        await pages((p) => store.listQueue(now + 1, undefined, p.after ? p : { ...p, after }), BY_CLAIM)
      ).flat();
      const left = [...(await store.queuePositions(now + 1))].sort((x, y) => x[1] - y[1]).map(([id]) => id);
      assert.deepEqual(
        rest.map((q) => q.sessionId),
        left.filter((id) => !inOrder.slice(0, 3).includes(id)),
        'every session still queued and not yet listed, once',
      );
      await store.close();
    });
  });
}
