/**
 * Checkpoints of running turns, on every store: recorded fenced (a stale generation, a
 * stale lease holder or a turn that no longer runs writes nothing), numbered on across
 * the retries of the same messages, never a commit (version, replies and state do not
 * move), deleted by the commit of their work and swept once their work is given up. The
 * model-call journal, fenced the same way, is read by a retry and goes with them. Each
 * checkpoint's event outlives its row: a turn's timeline reads it (turnActivity).
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Fence, Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, LEASE_MS, type OpenStore, RETRY, withAgent } from './conformance.js';

function input(fence: Fence, turnId: string, messageId: number, seq: { baseSeq: number; label: string }) {
  return {
    ...fence,
    turnId,
    messageId,
    ...seq,
    count: seq.baseSeq + 1,
    key: `checkpoints/${seq.label}`,
    size: 10,
  };
}

/** A session's message taken by a turn that records one checkpoint, labelled `label`. */
async function startWithCheckpoint(store: Store, sessionId: string, label: string, at: number) {
  const { message } = await store.enqueueMessage({ sessionId, agent: 'sh', text: 'job', now: at });
  const { fence, turn } = await claimAndStartTurn(store, at);
  const recorded = await store.recordCheckpoint(
    input(fence, turn.id, message.id, { baseSeq: 0, label }),
    at + 1,
  );
  assert.equal(recorded.code, 'ok');
  return { message, fence, turn };
}

async function retryAfterLoss(store: Store, at: number) {
  // w1 dies; w2 takes the session over and, after the backoff, retries the same messages.
  const later = at + LEASE_MS + 1;
  assert.equal(await store.renewWorker('w2', later), true);
  assert.ok((await store.reclaimExpiredLeases(later)).includes('s'));
  const due = later + RETRY.retryMaxMs;
  assert.equal(await store.renewWorker('w2', due), true);
  return { ...(await claimAndStartTurn(store, due, 'w2')), due };
}

export function runCheckpointConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance, checkpoints: ${kind}`, () => {
    test('a checkpoint is recorded fenced, numbered on by the retry, refused to a stale generation, and gone with the commit', async () => {
      const store = await withAgent(open);
      const { message } = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'job', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const first = await store.recordCheckpoint(
        input(fence, turn.id, message.id, { baseSeq: 0, label: 'step-1' }),
        BASE + 1,
      );
      assert.equal(first.code, 'ok');
      assert.equal(first.code === 'ok' && first.value.seq, 1);
      const second = await store.recordCheckpoint(
        input(fence, turn.id, message.id, { baseSeq: 1, label: 'step-2' }),
        BASE + 2,
      );
      assert.equal(second.code === 'ok' && second.value.seq, 2);
      const usage = { agent: 'sh', sessionId: 's', provider: 'anthropic', model: 'm', outputTokens: 1 };
      await store.recordModelUsage(
        { ...usage, turnId: turn.id, generation: fence.generation, inputTokens: 5 },
        BASE + 2,
      );
      const view = (await store.getSessionView('s', BASE + 2))!;
      assert.equal(view.workspaceVersion, 0, 'a checkpoint is not a commit');

      const retry = await retryAfterLoss(store, BASE + 2);
      assert.deepEqual(retry.turn.messageIds, [message.id], 'the retry is of the same messages');
      // The old generation is refused: its worker lost the session, whatever it still runs.
      const stale = await store.recordCheckpoint(
        input(fence, turn.id, message.id, { baseSeq: 2, label: 'late' }),
        retry.due,
      );
      assert.equal(stale.code, 'stale');
      const staleHolder = await store.recordCheckpoint(
        input({ ...retry.fence, workerId: 'w1' }, retry.turn.id, message.id, { baseSeq: 2, label: 'late' }),
        retry.due,
      );
      assert.equal(staleHolder.code, 'stale', 'another worker than the lease holder is refused');
      const oldTurn = await store.recordCheckpoint(
        input(retry.fence, turn.id, message.id, { baseSeq: 2, label: 'late' }),
        retry.due,
      );
      assert.equal(oldTurn.code, 'stale', 'a turn that no longer runs is refused');
      assert.deepEqual(
        (await store.listCheckpoints('s', message.id)).map((c) => [c.seq, c.baseSeq, c.label, c.turnId]),
        [
          [1, 0, 'step-1', turn.id],
          [2, 1, 'step-2', turn.id],
        ],
        'nothing of the refused ones',
      );
      const third = await store.recordCheckpoint(
        input(retry.fence, retry.turn.id, message.id, { baseSeq: 2, label: 'step-3' }),
        retry.due + 1,
      );
      assert.equal(third.code === 'ok' && third.value.seq, 3, 'the retry numbers on');
      assert.equal(await store.isCheckpointObjectNamed('checkpoints/step-3'), true);

      const outputs = [{ text: 'done' }];
      assert.equal(
        await store.commitTurn({ ...retry.fence, turnId: retry.turn.id, outputs }, retry.due + 2),
        'ok',
      );
      assert.deepEqual(
        await store.listCheckpoints('s', message.id),
        [],
        'the commit collects its checkpoints',
      );
      assert.equal(await store.isCheckpointObjectNamed('checkpoints/step-3'), false);

      // The rows went with the commit; their events stay for the turn's timeline.
      const record = (await store.getTurnRecord('s', retry.turn.id))!;
      const activity = await store.turnActivity('s', record.attempts);
      assert.deepEqual(
        activity.events
          .filter((e) => e.type === 'checkpoint')
          .map((e) => [e.data.seq, e.data.label, e.data.turnId, e.createdAt]),
        [
          [1, 'step-1', turn.id, BASE + 1],
          [2, 'step-2', turn.id, BASE + 2],
          [3, 'step-3', retry.turn.id, retry.due + 1],
        ],
        'one event per recorded checkpoint, none of the refused ones',
      );
      assert.deepEqual(
        activity.events.map((e) => e.type).filter((type) => type !== 'checkpoint'),
        ['started', 'retrying', 'started', 'reply'],
      );
      assert.deepEqual(
        activity.modelCalls.map((c) => [c.turnId, c.at, c.inputTokens]),
        [[turn.id, BASE + 2, 5]],
      );
      await store.close();
    });

    test('a model answer is journalled fenced, read by the retry, kept first-wins, and gone with the commit', async () => {
      const store = await withAgent(open);
      const { message } = await store.enqueueMessage({ sessionId: 's', agent: 'sh', text: 'job', now: BASE });
      const { fence, turn } = await claimAndStartTurn(store, BASE);
      const answer = {
        status: 200,
        contentType: 'text/event-stream',
        body: Buffer.from('event: a\n\n\u00e9\u0000'),
      };
      const entry = { turnId: turn.id, messageId: message.id, requestHash: 'h1', ...answer };
      assert.equal((await store.journalModelResponse({ ...fence, ...entry }, BASE + 1)).code, 'ok');
      const again = { ...entry, body: Buffer.from('other') };
      assert.equal((await store.journalModelResponse({ ...fence, ...again }, BASE + 2)).code, 'ok');
      assert.deepEqual(
        await store.findModelResponse('s', message.id, 'h1'),
        answer,
        'the first answer stays',
      );
      assert.equal(await store.findModelResponse('s', message.id, 'h2'), null);

      const retry = await retryAfterLoss(store, BASE + 2);
      const stale = await store.journalModelResponse({ ...fence, ...entry, requestHash: 'h2' }, retry.due);
      assert.equal(stale.code, 'stale', 'the lost generation journals nothing');
      assert.equal(await store.findModelResponse('s', message.id, 'h2'), null);
      assert.deepEqual(await store.findModelResponse('s', message.id, 'h1'), answer, 'the retry reads it');
      const outputs = [{ text: 'done' }];
      assert.equal(
        await store.commitTurn({ ...retry.fence, turnId: retry.turn.id, outputs }, retry.due + 1),
        'ok',
      );
      assert.equal(await store.findModelResponse('s', message.id, 'h1'), null, 'the commit collects it');
      await store.close();
    });

    test('the journal of work given up is swept with its checkpoints', async () => {
      const store = await withAgent(open);
      const failing = await startWithCheckpoint(store, 'f', 'a', BASE);
      const entry = { turnId: failing.turn.id, messageId: failing.message.id, requestHash: 'h', status: 200 };
      const answer = { ...entry, contentType: 'application/json', body: Buffer.from('{}') };
      assert.equal((await store.journalModelResponse({ ...failing.fence, ...answer }, BASE + 1)).code, 'ok');
      assert.notEqual(await store.findModelResponse('f', failing.message.id, 'h'), null);
      await store.sweepCheckpoints();
      assert.notEqual(
        await store.findModelResponse('f', failing.message.id, 'h'),
        null,
        'running work keeps it',
      );
      const abort = {
        ...failing.fence,
        turnId: failing.turn.id,
        code: 'OUTPUT_LIMIT_EXCEEDED',
        error: 'x',
      } as const;
      assert.equal(await store.abortTurn(abort, BASE + 3), 'ok');
      await store.sweepCheckpoints();
      assert.equal(await store.findModelResponse('f', failing.message.id, 'h'), null);
      await store.close();
    });

    test('the checkpoints of work given up are swept; those of work still to retry are kept', async () => {
      const store = await withAgent(open);
      const failing = await startWithCheckpoint(store, 'f', 'a', BASE);
      const kept = await startWithCheckpoint(store, 'k', 'b', BASE + 2);
      // A terminal failure: its messages end failed, and no retry will resume.
      const abort = {
        ...failing.fence,
        turnId: failing.turn.id,
        code: 'OUTPUT_LIMIT_EXCEEDED',
        error: 'too much',
      } as const;
      assert.equal(await store.abortTurn(abort, BASE + 3), 'ok');
      assert.deepEqual(await store.sweepCheckpoints(), ['checkpoints/a']);
      assert.deepEqual(await store.listCheckpoints('f', failing.message.id), []);
      assert.equal(
        (await store.listCheckpoints('k', kept.message.id)).length,
        1,
        'a running turn keeps its own',
      );
      assert.deepEqual(await store.sweepCheckpoints(), []);
      await store.close();
    });
  });
}
