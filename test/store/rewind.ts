/**
 * Conformance of rewind and fork from a version, run against SQLite and PostgreSQL by
 * store.conformance.test.ts: a rewind is a new version whose snapshot names the objects of
 * the older tree (across a snapshot too), history stays readable, compaction and the
 * versions it dropped are honoured, a rewind waits for the session's messages, and a
 * rewind racing a new message leaves exactly one order with nothing lost.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { agentSpecSchema, isBerthError, objectsOfVersion, retainedVersions } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, type OpenStore, withAgent } from './conformance.js';

const code = (c: string) => (e: unknown) => isBerthError(e) && e.code === c;

/** Commits one turn on session `s` writing layer `key` (null: a turn that changed no file). */
async function commit(
  store: Store,
  sessionId: string,
  key: string | null,
  now = BASE,
  agent = 'sh',
): Promise<number> {
  await store.renewWorker('w1', now);
  await store.enqueueMessage({ sessionId, agent, text: key ?? 'nothing', now });
  const { fence, turn } = await claimAndStartTurn(store, now);
  const baseVersion = (await store.getSessionView(sessionId, now))!.workspaceVersion;
  const workspace = { baseVersion, layer: key === null ? null : { key, size: key.length } };
  assert.equal(
    await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], state: { at: key }, workspace }, now),
    'ok',
  );
  await store.releaseSession(fence, now);
  return baseVersion + 1;
}

/** Compaction's snapshot of `version`, keyed `snapshots/<session><version>`; whether it was recorded. */
function compact(store: Store, sessionId: string, version: number, now = BASE): Promise<boolean> {
  return store.recordWorkspaceSnapshot(
    { sessionId, version, key: `snapshots/${sessionId}${version}`, size: 9 },
    now,
  );
}

/** The keys that build version `version`'s tree, as history and a worker read them. */
async function treeKeys(store: Store, sessionId: string, version?: number): Promise<string[] | null> {
  const chain = await store.getWorkspaceChain(sessionId);
  return objectsOfVersion(chain, version ?? chain.version)?.map((e) => e.key) ?? null;
}

export function runRewindConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, rewind and fork from a version: ${kind}`, () => {
    test('a rewind across a snapshot is a new version naming the old tree’s objects; history is kept', async () => {
      const store = await withAgent(open);
      for (const key of ['layers/1', 'layers/2', 'layers/3', 'layers/4']) await commit(store, 's', key);
      assert.equal(await compact(store, 's', 2), true);
      const rewound = await store.rewindSession({ sessionId: 's', toVersion: 3, now: BASE + 1 });
      assert.deepEqual([rewound.version, rewound.toVersion, rewound.objects], [5, 3, 2]);
      assert.equal(rewound.session.workspaceVersion, 5);
      const chain = await store.getWorkspaceChain('s');
      assert.deepEqual(
        chain.entries.map((e) => [e.version, e.kind, e.key]),
        [
          [5, 'snapshot', 'snapshots/s2'],
          [5, 'snapshot', 'layers/3'],
        ],
        'what a worker materialises: the objects of version 3, in order, none copied',
      );
      assert.deepEqual(
        await treeKeys(store, 's', 4),
        ['snapshots/s2', 'layers/3', 'layers/4'],
        'v4 is still kept',
      );
      // Back again to version 4, which lies behind the rewind's own snapshot.
      const again = await store.rewindSession({ sessionId: 's', toVersion: 4, now: BASE + 2 });
      assert.equal(again.version, 6);
      assert.deepEqual(await treeKeys(store, 's'), ['snapshots/s2', 'layers/3', 'layers/4']);
      // To the snapshot's own version: its one object.
      await store.rewindSession({ sessionId: 's', toVersion: 2, now: BASE + 3 });
      assert.deepEqual(await treeKeys(store, 's'), ['snapshots/s2']);
      // The next turn runs on the rewound version and appends to it.
      assert.equal(await commit(store, 's', 'layers/8', BASE + 4), 8);
      assert.deepEqual(await treeKeys(store, 's'), ['snapshots/s2', 'layers/8']);
      assert.deepEqual(await treeKeys(store, 's', 6), ['snapshots/s2', 'layers/3', 'layers/4']);
      // The state is not versioned: the rewind left it as the last commit wrote it.
      assert.deepEqual(await store.getState('s'), { at: 'layers/8' });
      const events = (await store.eventsAfter('s', 0, 1000)).filter((e) => e.type === 'rewound');
      assert.deepEqual(
        events.map((e) => e.data),
        [
          { fromVersion: 4, toVersion: 3, version: 5 },
          { fromVersion: 5, toVersion: 4, version: 6 },
          { fromVersion: 6, toVersion: 2, version: 7 },
        ],
      );
      // Refusals: a version compacted away (naming what is kept), one not reached, another tenant's session.
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + 5 }),
        (e: unknown) => {
          assert.ok(isBerthError(e, 'VERSION_NOT_RETAINED'));
          assert.match(e.message, /versions 2-8 are available/);
          return true;
        },
      );
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 9, now: BASE + 5 }),
        code('INVALID_INPUT'),
      );
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 3, now: BASE + 5, tenant: 'other' }),
        code('SESSION_NOT_FOUND'),
      );
      await assert.rejects(
        store.rewindSession({ sessionId: 'ghost', toVersion: 0, now: BASE + 5 }),
        code('SESSION_NOT_FOUND'),
      );
      // Compaction after the rewinds drops everything before its snapshot, the rewinds' rows too.
      assert.equal(await compact(store, 's', 8), true);
      assert.equal(await store.isWorkspaceObjectNamed('layers/3'), false, 'garbage once no version needs it');
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 6, now: BASE + 6 }),
        code('VERSION_NOT_RETAINED'),
      );
      await store.archiveSession('s', BASE + 7);
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 8, now: BASE + 7 }),
        code('SESSION_ARCHIVED'),
      );
      await store.close();
    });

    test('a rewind to an empty tree names the empty object it is given', async () => {
      const store = await withAgent(open);
      await commit(store, 's', null);
      await commit(store, 's', 'layers/2');
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + 1 }),
        code('INTERNAL'),
        'no object given for an empty tree',
      );
      const empty = { key: 'snapshots/empty', size: 30 };
      const r = await store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + 1, emptyTree: empty });
      assert.deepEqual([r.version, r.objects], [3, 0]);
      assert.deepEqual(await treeKeys(store, 's'), ['snapshots/empty']);
      assert.deepEqual(await treeKeys(store, 's', 2), ['layers/2'], 'the version rewound from is kept');
      await store.close();
    });

    test('a fork from a version before a compaction keeps its objects; a dropped version is refused', async () => {
      const store = await withAgent(open);
      for (const key of ['layers/1', 'layers/2', 'layers/3']) await commit(store, 's', key);
      const fork = await store.forkSession({ sourceId: 's', sessionId: 'f', fromVersion: 1, now: BASE + 1 });
      assert.equal(fork.workspaceVersion, 1);
      assert.deepEqual(await treeKeys(store, 'f'), ['layers/1']);
      assert.deepEqual(
        await store.getState('f'),
        { at: 'layers/3' },
        'the state is the source’s (not versioned)',
      );
      assert.equal(await compact(store, 's', 3), true);
      assert.equal(await store.isWorkspaceObjectNamed('layers/1'), true, 'the fork still names it');
      assert.equal(await store.isWorkspaceObjectNamed('layers/2'), false, 'nobody names it');
      assert.deepEqual(await treeKeys(store, 'f'), ['layers/1']);
      // The fork runs on from its version.
      assert.equal(await commit(store, 'f', 'layers/f2', BASE + 2), 2);
      assert.deepEqual(await treeKeys(store, 'f'), ['layers/1', 'layers/f2']);
      await assert.rejects(
        store.forkSession({ sourceId: 's', sessionId: 'g', fromVersion: 2, now: BASE + 3 }),
        (e: unknown) => {
          assert.ok(isBerthError(e, 'VERSION_NOT_RETAINED'));
          assert.match(e.message, /only version 3 is available/);
          return true;
        },
      );
      await assert.rejects(
        store.forkSession({ sourceId: 's', sessionId: 'g', fromVersion: 4, now: BASE + 3 }),
        code('INVALID_INPUT'),
      );
      assert.equal(await store.getSessionView('g', BASE + 3), null, 'a refused fork creates nothing');
      // A fork of the fork from its first version: every object it names up to there.
      const again = await store.forkSession({ sourceId: 'f', sessionId: 'g', fromVersion: 1, now: BASE + 4 });
      assert.equal(again.workspaceVersion, 1);
      assert.deepEqual(await treeKeys(store, 'g'), ['layers/1']);
      await store.close();
    });

    test('a rewind and a fork wait for the session’s messages: refused while one is pending or a turn runs', async () => {
      const store = await withAgent(open);
      await commit(store, 's', 'layers/1');
      await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 1 });
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 0, now: BASE + 1 }),
        (e: unknown) => {
          assert.ok(isBerthError(e, 'SESSION_BUSY'));
          assert.match(e.message, /1 inbound message\(s\) pending or processing/);
          return true;
        },
      );
      await assert.rejects(
        store.forkSession({ sourceId: 's', sessionId: 'f', now: BASE + 1 }),
        code('SESSION_BUSY'),
        'a fork waits too',
      );
      const { fence, turn } = await claimAndStartTurn(store, BASE + 2);
      await assert.rejects(
        store.forkSession({ sourceId: 's', sessionId: 'f', fromVersion: 1, now: BASE + 2 }),
        code('SESSION_BUSY'),
      );
      await assert.rejects(
        store.rewindSession({ sessionId: 's', toVersion: 0, now: BASE + 2 }),
        (e: unknown) => isBerthError(e, 'SESSION_BUSY') && e.message.includes(`turn ${turn.id} running`),
      );
      const workspace = { baseVersion: 1, layer: { key: 'layers/2', size: 1 } };
      assert.equal(
        await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], workspace }, BASE + 3),
        'ok',
      );
      // Answered: the rewind goes through, even with the worker still holding the session.
      const r = await store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + 4 });
      assert.equal(r.version, 3);
      assert.equal(
        (await store.forkSession({ sourceId: 's', sessionId: 'f', fromVersion: 2, now: BASE + 4 }))
          .workspaceVersion,
        2,
      );
      await store.close();
    });

    for (const order of ['rewind first', 'message first'] as const)
      test(`a rewind racing a new message (${order}): exactly one wins, nothing is lost`, async () => {
        const store = await withAgent(open);
        await commit(store, 's', 'layers/1');
        await commit(store, 's', 'layers/2');
        const rewind = () => store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + 1 });
        const send = () => store.enqueueMessage({ sessionId: 's', text: 'next', now: BASE + 1 });
        if (order === 'rewind first') {
          assert.equal((await rewind()).version, 3);
          await send();
        } else {
          await send();
          await assert.rejects(rewind(), code('SESSION_BUSY'));
        }
        const rewound = order === 'rewind first';
        // The message runs, on the version its order says, and commits on it.
        const { fence, turn } = await claimAndStartTurn(store, BASE + 2);
        const base = (await store.getSessionView('s', BASE + 2))!.workspaceVersion;
        assert.equal(base, rewound ? 3 : 2);
        assert.deepEqual(await treeKeys(store, 's'), rewound ? ['layers/1'] : ['layers/1', 'layers/2']);
        const workspace = { baseVersion: base, layer: null };
        assert.equal(
          await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], workspace }, BASE + 3),
          'ok',
        );
        const inbound = (await store.listMessages('s', 0, 100)).filter((m) => m.direction === 'in');
        assert.deepEqual(
          inbound.map((m) => m.status),
          ['done', 'done', 'done'],
        );
        await store.close();
      });

    test('rewinds and new messages sent at once: each pair ends in one of the two orders', async () => {
      const store = await withAgent(open);
      await commit(store, 's', 'layers/1');
      await commit(store, 's', 'layers/2');
      let rewinds = 0;
      for (let i = 0; i < 8; i++) {
        const before = (await store.getSessionView('s', BASE))!.workspaceVersion;
        const [rewind, sent] = await Promise.allSettled([
          store.rewindSession({ sessionId: 's', toVersion: 1, now: BASE + i }),
          store.enqueueMessage({ sessionId: 's', text: `m${i}`, now: BASE + i }),
        ]);
        assert.equal(sent.status, 'fulfilled', 'a message is always accepted');
        if (rewind.status === 'fulfilled') {
          rewinds++;
          assert.equal(rewind.value.version, before + 1);
        } else assert.ok(isBerthError(rewind.reason, 'SESSION_BUSY'), String(rewind.reason));
        const after = (await store.getSessionView('s', BASE))!.workspaceVersion;
        assert.equal(after, rewind.status === 'fulfilled' ? before + 1 : before);
        // Answer the message so the next round starts idle.
        const { fence, turn } = await claimAndStartTurn(store, BASE + i);
        const workspace = { baseVersion: after, layer: null };
        assert.equal(
          await store.commitTurn({ ...fence, turnId: turn.id, outputs: [], workspace }, BASE + i),
          'ok',
        );
        await store.releaseSession(fence, BASE + i);
      }
      const inbound = (await store.listMessages('s', 0, 100)).filter((m) => m.direction === 'in');
      assert.equal(inbound.length, 10);
      assert.ok(
        inbound.every((m) => m.status === 'done'),
        'no message lost',
      );
      const rewound = (await store.eventsAfter('s', 0, 1000)).filter((e) => e.type === 'rewound');
      assert.equal(rewound.length, rewinds);
      await store.close();
    });

    test('retention: compaction keeps what the agent’s policy asks for; a version it dropped is refused', async () => {
      const store = await withAgent(open);
      for (const [name, retention] of [
        ['keep2', { versions: 2 }],
        ['keepall', { all: true }],
        ['keepday', { days: 1 }],
      ] as const)
        await store.createAgent(agentSpecSchema.parse({ name, provider: 'command', retention }), BASE);
      const retained = async (sessionId: string) =>
        retainedVersions(await store.getWorkspaceChain(sessionId));
      for (const [session, agent] of [
        ['d', 'sh'],
        ['k', 'keep2'],
        ['a', 'keepall'],
      ] as const) {
        for (let v = 1; v <= 6; v++) await commit(store, session, `layers/${session}${v}`, BASE, agent);
        assert.equal(await compact(store, session, 3), true);
      }
      assert.deepEqual(await retained('d'), { oldest: 3, newest: 6 }, 'default: since the snapshot');
      // The last 2 of 6 are 5-6; the cut is at the newest compaction snapshot before them.
      assert.deepEqual(await retained('k'), { oldest: 3, newest: 6 });
      assert.deepEqual(await retained('a'), { oldest: 0, newest: 6 }, 'all: nothing dropped');
      assert.equal(await store.isWorkspaceObjectNamed('layers/a1'), true);
      assert.equal(await store.isWorkspaceObjectNamed('layers/k1'), false, 'garbage for collection');
      await assert.rejects(store.rewindSession({ sessionId: 'k', toVersion: 2, now: BASE }), (e: unknown) => {
        assert.ok(isBerthError(e, 'VERSION_NOT_RETAINED'));
        assert.match(e.message, /versions 3-6 are available/);
        return true;
      });
      assert.equal((await store.rewindSession({ sessionId: 'a', toVersion: 1, now: BASE })).version, 7);
      // A later compaction past the last 2 drops what they no longer need.
      for (let v = 7; v <= 9; v++) await commit(store, 'k', `layers/k${v}`, BASE, 'keep2');
      assert.equal(await compact(store, 'k', 8), true);
      assert.deepEqual(await retained('k'), { oldest: 8, newest: 9 });
      await assert.rejects(
        store.forkSession({ sourceId: 'k', sessionId: 'k2', fromVersion: 7, now: BASE }),
        code('VERSION_NOT_RETAINED'),
      );
      // Days: what was recorded in the last day stays; older rows go at the next compaction.
      for (let v = 1; v <= 3; v++) await commit(store, 'y', `layers/y${v}`, BASE, 'keepday');
      for (let v = 4; v <= 6; v++) await commit(store, 'y', `layers/y${v}`, BASE + 2 * 86_400_000, 'keepday');
      assert.equal(await compact(store, 'y', 2, BASE + 2 * 86_400_000), true);
      assert.deepEqual(
        await retained('y'),
        { oldest: 2, newest: 6 },
        'no compaction snapshot past the floor yet',
      );
      assert.equal(await compact(store, 'y', 5, BASE + 2 * 86_400_000), true);
      assert.deepEqual(await retained('y'), { oldest: 2, newest: 6 }, 'v4 was recorded within the day');
      await store.close();
    });
  });
}
