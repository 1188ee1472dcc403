/**
 * `berth logs --turn` against the real API (SQLite, HTTP on a port): a running turn's
 * timeline followed while its try is killed and the retry resumes and commits; each entry
 * printed once, in order; following ends when the work is over. `last` with no turn says so.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { listenMemoryApi } from '../../test/helpers/memory-api.js';
import { issueToken } from '../api/api-tokens.js';
import { Berth } from '../client/index.js';
import { agentSpecSchema, isBerthError, toolProgressText } from '../core/index.js';
import { printTimeline } from './turn-timeline-lines.js';

test('logs --turn --follow: the kill and the resume as they happen, each line once, until the commit', async (t) => {
  const { url, store } = await listenMemoryApi(t);
  let at = Date.now();
  const berth = new Berth({ url, token: (await issueToken(store, 'acme', 'a', at)).token });
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command' }), at, 'acme');
  await store.registerWorker({ id: 'w1', host: 'h', pid: 1, slots: 1, heartbeatAt: at, startedAt: at });
  await berth.sessions.create({ id: 's1', agent: 'sh' });
  await assert.rejects(
    printTimeline(berth, 's1', 'last', { follow: false, json: false }, () => {}),
    (err) => isBerthError(err, 'SESSION_TURN_NOT_FOUND'),
  );

  await store.enqueueMessage({ sessionId: 's1', agent: 'sh', text: 'job', now: at, tenant: 'acme' });
  const claimed = await store.claimRunnableSession('w1', at);
  const fence = { sessionId: 's1', generation: claimed!.session.generation, workerId: 'w1' };
  const start = async () => {
    at += 60_000; // past the retry's backoff
    const started = await store.startTurn(fence, at);
    return started.code === 'ok' && started.value ? started.value.turn : assert.fail('no turn');
  };
  const first = await start();
  const running = { ...fence, turnId: first.id };
  await store.recordProgress({ ...running, text: toolProgressText('bash', 'started') }, ++at);
  const checkpoint = { messageId: first.messageIds[0]!, baseSeq: 0, count: 1, label: 'step-1', key: '' };
  assert.equal((await store.recordCheckpoint({ ...running, ...checkpoint, size: 2048 }, ++at)).code, 'ok');

  const lines: string[] = [];
  let seen: (() => void) | undefined;
  const followed = printTimeline(berth, 's1', 'last', { follow: true, json: false }, (line) => {
    lines.push(line);
    if (line.includes('checkpoint 1')) seen?.();
  });
  await new Promise<void>((resolve) => {
    seen = resolve;
    if (lines.some((l) => l.includes('checkpoint 1'))) resolve();
  });
  await store.abortTurn({ ...running, code: 'SANDBOX_EXITED', error: 'sandbox exited (137)' }, ++at);
  const retry = await start();
  assert.equal(
    await store.commitTurn({ ...fence, turnId: retry.id, outputs: [{ text: 'done' }] }, ++at),
    'ok',
  );
  await followed;

  const time = (ms: number) => new Date(ms).toISOString().slice(11, 23);
  assert.deepEqual(
    lines.map((l) => l.replace(/\(worker w1, sandbox [^)]*\)/, '(worker w1)')),
    [
      `${time(first.startedAt)}  try 1 started  (worker w1)`,
      `${time(first.startedAt + 1)}    tool bash`,
      `${time(first.startedAt + 2)}    checkpoint 1  (step-1, 2.0 KiB)`,
      `${time(first.startedAt + 3)}  try 1 aborted SANDBOX_EXITED: sandbox exited (137)  (retried at once)`,
      `${time(retry.startedAt)}  try 2 started  (worker w1)`,
      `${time(retry.startedAt)}  resumed from checkpoint 1  (step-1)`,
      `${time(retry.startedAt + 1)}    reply: done`,
      `${time(retry.startedAt + 1)}  try 2 committed`,
    ],
  );
});
