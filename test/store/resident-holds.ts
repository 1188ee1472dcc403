/**
 * Conformance of where a resident workspace lives and of held sessions, run against SQLite
 * and PostgreSQL by store.conformance.test.ts: the holder is recorded under the lease's
 * fence, a commit records its write only on the holder the store names, a turn aborted with
 * RESIDENT_WORKSPACE_LOST keeps its messages and holds the session out of the queue, and
 * only an operator's resume or reset lets it go on (a reset recorded in the audit log).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { isBerthError } from '../../src/core/index.js';
import type { Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, type OpenStore, withAgent } from './conformance.js';

const HOLDER = { holder: 'dd_a', holderName: 'a:/var/lib/berth' };

/** A session whose first turn took `dd_a` as its holder and committed; its lease released. */
async function heldByA(store: Store) {
  await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
  const { fence, turn } = await claimAndStartTurn(store, BASE);
  assert.equal(await store.recordResidentHolder({ ...fence, ...HOLDER }, BASE + 1), 'ok');
  const commit = {
    ...fence,
    turnId: turn.id,
    outputs: [{ text: 'ok' }],
    workspace: { baseVersion: 0, residentHolder: 'dd_a' },
  };
  assert.equal(await store.commitTurn(commit, BASE + 5), 'ok');
  const capture = { ...fence, version: 1, holder: 'dd_a', turnId: turn.id };
  const object = { key: 'snapshots/a', size: 10, kind: 'snapshot' as const };
  assert.deepEqual(await store.recordResidentCapture({ ...capture, object }, BASE + 6), {
    code: 'ok',
    version: 1,
  });
  assert.equal(await store.releaseSession(fence, BASE + 6), 'ok');
  return { capture };
}

/**
 * A turn claimed by w2 and aborted because w2's data dir does not hold the workspace: of a
 * new message 'two' (with 'three' sent while it runs), or, `again`, of the messages kept.
 */
async function lostOnB(store: Store, now: number, again = false) {
  if (!again) await store.enqueueMessage({ sessionId: 's', text: 'two', now });
  const { fence, turn } = await claimAndStartTurn(store, now, 'w2');
  if (!again) await store.enqueueMessage({ sessionId: 's', text: 'three', now: now + 1 });
  const error = 'held only by data dir a:/var/lib/berth';
  const abort = { ...fence, turnId: turn.id, code: 'RESIDENT_WORKSPACE_LOST' as const, error };
  assert.equal(await store.abortTurn(abort, now + 2), 'ok');
  assert.equal(await store.releaseSession(fence, now + 3), 'ok');
  return { error };
}

export function runResidentHoldConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, resident workspaces and holds: ${kind}`, () => {
    test('the holder is recorded under the fence; a commit records its write on that holder only', async () => {
      const store = await withAgent(open);
      await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'one', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const stale = { ...fence, generation: fence.generation - 1, ...HOLDER };
      assert.equal(await store.recordResidentHolder(stale, BASE + 1), 'stale');
      assert.equal((await store.getSessionView('s', BASE + 1))?.resident.holder, null, 'nothing recorded');
      assert.equal(await store.recordResidentHolder({ ...fence, ...HOLDER }, BASE + 1), 'ok');
      assert.deepEqual((await store.getSessionView('s', BASE + 1))?.resident, {
        ...HOLDER,
        writtenAt: BASE + 1,
        capturedVersion: null,
        capturedAt: null,
        epoch: 0,
      });
      const commit = { ...fence, turnId: turn.id, outputs: [{ text: 'ok' }] };
      // A commit naming another data dir than the holder writes nothing.
      await assert.rejects(
        store.commitTurn({ ...commit, workspace: { baseVersion: 0, residentHolder: 'dd_b' } }, BASE + 5),
        (e: unknown) => isBerthError(e, 'INTERNAL'),
      );
      assert.equal((await store.getTurn(turn.id))?.status, 'running');
      assert.equal(
        await store.commitTurn(
          { ...commit, workspace: { baseVersion: 1, residentHolder: 'dd_a' } },
          BASE + 5,
        ),
        'workspace_behind',
        'it ran on another version than the session’s',
      );
      assert.equal(
        await store.commitTurn(
          { ...commit, workspace: { baseVersion: 0, residentHolder: 'dd_a' } },
          BASE + 5,
        ),
        'ok',
      );
      const view = (await store.getSessionView('s', BASE + 5))!;
      assert.equal(view.resident.writtenAt, BASE + 5, 'the time of the last turn that wrote it');
      assert.equal(view.workspaceVersion, 1);
      assert.equal((await store.getTurn(turn.id))?.baseVersion, 0, 'the version it ran on');
      await store.close();
    });

    test('a capture enters the chain at its version, fenced, only while the version and the holder are the same; a version captured already moves on', async () => {
      const store = await withAgent(open);
      const { capture } = await heldByA(store);
      let chain = await store.getWorkspaceChain('s');
      assert.deepEqual(
        chain.entries.map((e) => [e.version, e.kind, e.key]),
        [[1, 'snapshot', 'snapshots/a']],
        'the first capture: the whole tree as the snapshot of version 1',
      );
      const layer = { key: 'layers/b', size: 5, kind: 'layer' as const };
      assert.equal(
        (await store.recordResidentCapture({ ...capture, object: layer }, BASE + 7)).code,
        'stale',
        'the lease was given up',
      );
      await store.enqueueMessage({ sessionId: 's', text: 'two', now: BASE + 8 });
      const next = await claimAndStartTurn(store, BASE + 8);
      const capture2 = { ...next.fence, version: 2, holder: 'dd_a', turnId: next.turn.id };
      assert.equal(
        (await store.recordResidentCapture({ ...capture2, object: layer }, BASE + 9)).code,
        'moved',
        'no commit made version 2 yet',
      );
      const commit = {
        ...next.fence,
        turnId: next.turn.id,
        outputs: [{ text: 'ok' }],
        workspace: { baseVersion: 1, residentHolder: 'dd_a' },
      };
      assert.equal(await store.commitTurn(commit, BASE + 10), 'ok');
      let view = (await store.getSessionView('s', BASE + 10))!;
      assert.equal(view.resident.capturedVersion, 1, 'committed, not yet captured: behind the version');
      assert.equal(view.workspaceVersion, 2);
      assert.equal(
        (await store.recordResidentCapture({ ...capture2, holder: 'dd_b', object: layer }, BASE + 11)).code,
        'moved',
        'another data dir holds it',
      );
      assert.deepEqual(await store.recordResidentCapture({ ...capture2, object: layer }, BASE + 11), {
        code: 'ok',
        version: 2,
      });
      view = (await store.getSessionView('s', BASE + 11))!;
      assert.deepEqual([view.resident.capturedVersion, view.resident.capturedAt], [2, BASE + 11]);
      chain = await store.getWorkspaceChain('s');
      assert.deepEqual(
        chain.entries.map((e) => [e.version, e.kind, e.key, e.turnId]),
        [
          [1, 'snapshot', 'snapshots/a', null],
          [2, 'layer', 'layers/b', next.turn.id],
        ],
      );
      // Before a release: written since its capture, version 2 moves on by one for it.
      const release = { ...capture2, turnId: null, object: { ...layer, key: 'layers/c' } };
      assert.deepEqual(await store.recordResidentCapture(release, BASE + 12), { code: 'ok', version: 3 });
      view = (await store.getSessionView('s', BASE + 12))!;
      assert.deepEqual([view.workspaceVersion, view.resident.capturedVersion], [3, 3]);
      assert.deepEqual((await store.getWorkspaceChain('s')).entries.map((e) => [e.version, e.key]).at(-1), [
        3,
        'layers/c',
      ]);
      assert.deepEqual(
        await store.recordResidentCapture({ ...release, version: 3, object: null }, BASE + 13),
        { code: 'ok', version: 3 },
        'nothing changed: recorded at the version as it is',
      );
      assert.equal((await store.getSessionView('s', BASE + 13))?.workspaceVersion, 3);
      await store.close();
    });

    test('RESIDENT_WORKSPACE_LOST holds the session: messages kept with their tries, out of the queue, new ones wait', async () => {
      const store = await withAgent(open);
      await heldByA(store);
      const { error } = await lostOnB(store, BASE + 10);
      const inbound = (await store.listMessages('s', 0, 10)).filter((m) => m.direction === 'in');
      assert.deepEqual(
        inbound.map((m) => [m.text, m.status, m.tries]),
        [
          ['one', 'done', 1],
          ['two', 'pending', 0],
          ['three', 'pending', 0],
        ],
      );
      const view = (await store.getSessionView('s', BASE + 20))!;
      assert.equal(view.status, 'held');
      assert.deepEqual(view.hold, { code: 'RESIDENT_WORKSPACE_LOST', message: error, since: BASE + 12 });
      assert.equal(view.queuePosition, null);
      assert.equal((await store.listSessionViews(BASE + 20))[0]?.status, 'held', 'a listing agrees');
      assert.equal(await store.queueDepth(BASE + 20), 0);
      assert.equal(await store.claimRunnableSession('w1', BASE + 20), null, 'nobody claims it');
      await store.enqueueMessage({ sessionId: 's', text: 'four', now: BASE + 21 });
      assert.equal(
        await store.claimRunnableSession('w1', BASE + 22),
        null,
        'a new message waits with the others',
      );
      const held = (await store.eventsAfter('s', 0, 100)).filter((e) => e.type === 'held');
      assert.deepEqual(
        held.map((e) => [e.data.code, e.data.error]),
        [['RESIDENT_WORKSPACE_LOST', error]],
      );
      await store.close();
    });

    test('resume lets a held session go on as it is; reset-workspace accepts the loss, recorded; neither applies to a session not held', async () => {
      const store = await withAgent(open);
      await heldByA(store);
      await assert.rejects(
        store.releaseHold({ sessionId: 's', resetWorkspace: false, now: BASE + 7 }),
        (e: unknown) => isBerthError(e, 'SESSION_NOT_HELD'),
      );
      await lostOnB(store, BASE + 10);
      await assert.rejects(
        store.releaseHold({ sessionId: 's', resetWorkspace: true, now: BASE + 20, tenant: 'other' }),
        (e: unknown) => isBerthError(e, 'SESSION_NOT_FOUND'),
      );
      const resumed = await store.releaseHold({ sessionId: 's', resetWorkspace: false, now: BASE + 20 });
      assert.equal(resumed.hold, null);
      assert.equal(resumed.status, 'queued');
      assert.deepEqual(
        resumed.resident,
        { ...HOLDER, writtenAt: BASE + 5, capturedVersion: 1, capturedAt: BASE + 6, epoch: 0 },
        'the holder and its capture stay',
      );
      await lostOnB(store, BASE + 30, true);
      const reset = await store.releaseHold({ sessionId: 's', resetWorkspace: true, now: BASE + 40 });
      assert.deepEqual(reset.resident, {
        holder: null,
        holderName: null,
        writtenAt: null,
        capturedVersion: null,
        capturedAt: null,
        epoch: 1,
      });
      assert.equal(reset.status, 'queued');
      const audit = (await store.listAudit(0, 100)).filter((a) => a.kind === 'workspace-reset');
      assert.equal(audit.length, 1);
      assert.equal(audit[0]!.sessionId, 's');
      assert.equal(audit[0]!.data.holderName, HOLDER.holderName);
      assert.equal(audit[0]!.data.writtenAt, BASE + 5);
      assert.equal(audit[0]!.data.heldCode, 'RESIDENT_WORKSPACE_LOST');
      // The kept messages are answered in their order.
      const { turn } = await claimAndStartTurn(store, BASE + 41, 'w2');
      const taken = (await store.listMessages('s', 0, 10)).filter((m) => m.turnId === turn.id);
      assert.deepEqual(
        taken.map((m) => m.text),
        ['two', 'three'],
      );
      await store.close();
    });
  });
}
