/**
 * Faults injected the way they happen, against real sandboxes: `docker kill` mid-turn,
 * a runner that dies on every attempt, a runner frozen with SIGSTOP (no heartbeats).
 * In each case the message is re-dispatched without anyone resending it.
 */
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ScriptPlan } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { startTestHost } from './helpers/test-host.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);

test('docker kill mid-turn: the turn is retried and the reply still arrives, tries = 2', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t);
  await client.request('POST', '/v1/agents', { name: 'scr', provider: 'script' });
  let killed: Promise<void> | undefined;
  const events = await sendAndCollect(
    'k1',
    { agent: 'scr', text: plan({ steps: [{ progress: 'working' }, { sleep: 2500 }], reply: 'survived' }) },
    (e) => {
      if (e.type === 'progress' && !killed) {
        killed = host.store.getSessionView('k1', Date.now()).then(async (v) => {
          await host.docker.getContainer(v!.sandbox!).kill();
        });
      }
      return e.type === 'reply';
    },
  );
  await killed;
  assert.equal(events.at(-1)?.data.text, 'survived');
  assert.deepEqual(
    events.filter((e) => e.type === 'started' || e.type === 'retrying').map((e) => e.type),
    ['started', 'retrying', 'started'],
  );
  // From the engine's exit event to the abort: the figure behind berth_detection_seconds.
  const detected = events.find((e) => e.type === 'retrying')?.data.detectedAfterMs;
  assert.ok(typeof detected === 'number' && detected >= 0, `detectedAfterMs: ${String(detected)}`);
  const [inbound] = await host.store.listMessages('k1', 0, 1);
  assert.equal(inbound?.tries, 2);
  assert.equal(inbound?.status, 'done');
  const turns = await host.store.listTurns('k1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['aborted', 'committed'],
  );
  assert.equal(turns[0]!.errorCode, 'SANDBOX_EXITED');
  assert.match(turns[0]!.error!, /sandbox exited mid-turn/);
  assert.ok(turns[1]!.generation > turns[0]!.generation, 'the retry runs under a new generation');
});

test('a runner that dies on every attempt: failed after 5 tries, with an error event', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t, { BERTH_RETRY_BASE: '100ms' });
  await client.request('POST', '/v1/agents', { name: 'doomed', provider: 'script' });
  const events = await sendAndCollect(
    'd1',
    { agent: 'doomed', text: plan({ steps: [{ run: 'kill -KILL $BERTH_RUNNER_PID; sleep 5' }] }) },
    (e) => e.type === 'failed',
  );
  assert.equal(events.filter((e) => e.type === 'started').length, 5);
  assert.equal(events.filter((e) => e.type === 'retrying').length, 4);
  const failed = events.at(-1)!;
  assert.equal(failed.data.tries, 5);
  assert.equal(failed.data.code, 'SANDBOX_EXITED');
  const [inbound] = await host.store.listMessages('d1', 0, 1);
  assert.equal(inbound?.status, 'failed');
  assert.equal((await host.store.getSessionView('d1', Date.now()))?.status, 'failed');
  assert.equal((await host.store.listTurns('d1')).length, 5);
});

test('a sandbox that stops heartbeating is killed and the turn retried, never a hang', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t, {
    BERTH_HEARTBEAT_TIMEOUT: '3s',
    BERTH_HEARTBEAT_INTERVAL: '500ms',
  });
  await client.request('POST', '/v1/agents', { name: 'frozen', provider: 'script' });
  // The first attempt freezes its runner (SIGSTOP): no more heartbeats. The retry (attempt 2) goes on.
  const events = await sendAndCollect(
    'h1',
    {
      agent: 'frozen',
      text: plan({
        steps: [{ run: 'if [ "$BERTH_ATTEMPT" = 1 ]; then kill -STOP $BERTH_RUNNER_PID; sleep 60; fi' }],
        reply: 'thawed',
      }),
    },
    (e) => e.type === 'reply',
  );
  assert.equal(events.at(-1)?.data.text, 'thawed');
  const turns = await host.store.listTurns('h1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['aborted', 'committed'],
  );
  assert.equal(turns[0]!.errorCode, 'SANDBOX_UNRESPONSIVE');
  assert.match(turns[0]!.error!, /heartbeat-timeout/);
  assert.equal((await host.store.listMessages('h1', 0, 1))[0]?.tries, 2);
});

test('a sandbox that cannot start costs a try each time and ends failed, not a tight loop', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t, { BERTH_RETRY_BASE: '50ms' });
  await client.request('POST', '/v1/agents', {
    name: 'ghostimg',
    provider: 'command',
    image: 'berth-no-such-image:0',
  });
  const events = await sendAndCollect('g1', { agent: 'ghostimg', text: 'true' }, (e) => e.type === 'failed');
  assert.equal(events.filter((e) => e.type === 'started').length, 5);
  assert.equal(events.at(-1)?.data.code, 'IMAGE_MISSING');
  assert.match(String(events.at(-1)?.data.error), /berth-no-such-image/);
  assert.equal((await host.store.listTurns('g1')).length, 5);
});

test('a turn whose script step fails is aborted with STEP_FAILED, the step reported, and retried in a fresh sandbox after its backoff (session id with a dot)', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t);
  await client.request('POST', '/v1/agents', { name: 'flaky', provider: 'script' });
  const events = await sendAndCollect(
    'retry.me',
    {
      agent: 'flaky',
      text: plan({
        steps: [{ run: 'if [ "$BERTH_ATTEMPT" = 1 ]; then echo first try fails >&2; exit 1; fi' }],
        reply: 'ok',
      }),
    },
    (e) => e.type === 'reply',
  );
  const retrying = events.find((e) => e.type === 'retrying');
  assert.equal(retrying?.data.code, 'STEP_FAILED');
  assert.match(String(retrying?.data.error), /first try fails/);
  // The runner reported the failed step as data before it aborted.
  const reported = events.find((e) => e.type === 'progress' && e.data.failedStep);
  assert.deepEqual(reported?.data.failedStep, { messageId: retrying?.data.messageId, index: 0, kind: 'run' });
  const turns = await host.store.listTurns('retry.me');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['aborted', 'committed'],
  );
  assert.ok(turns[1]!.generation > turns[0]!.generation, 'the retry gets a fresh sandbox');
});

test('a worker stopped gracefully mid-turn (deploy, restart) requeues the turn without spending a try', async (t) => {
  const { host, client, dataDir } = await startTestHost(t);
  await client.request('POST', '/v1/agents', { name: 'long', provider: 'script' });
  const posted = await client.request<{ eventId: number }>('POST', '/v1/sessions/g1/messages', {
    agent: 'long',
    text: plan({ steps: [{ sleep: 10_000 }], reply: 'late' }),
  });
  for await (const e of client.events('g1', posted.eventId, AbortSignal.timeout(30_000)))
    if (e.type === 'started') break;
  const observer = openSqliteStore({ path: join(dataDir, 'berth.db'), leaseMs: 10_000, retry: host.config });
  t.after(() => observer.close());
  await host.close();
  const [message] = await observer.listMessages('g1', 0, 1);
  assert.equal(message?.status, 'pending', 'back in the queue for the next worker');
  assert.equal(message?.tries, 0, 'the stop cost it no try');
  const [turn] = await observer.listTurns('g1');
  assert.equal(turn?.status, 'aborted');
  assert.equal(turn?.errorCode, 'WORKER_STOPPING');
});
