/**
 * Every sandbox's lifecycle reaches the store and /v1/sandboxes, warm ones included: a
 * warm sandbox is listed unbound, then bound to the session that takes it, serving while
 * its turn runs; one `docker kill`ed mid-turn is listed gone with SandboxExited and its
 * exit code; one that idles out is gone with Idle. Reports are asynchronous (off the turn's
 * path), so each check waits for the record, bounded.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Sandbox } from '../src/client/index.js';
import { startTestHost, type TestHost } from './helpers/test-host.js';

const replied = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

async function sandboxes(h: TestHost): Promise<Sandbox[]> {
  return (await h.client.request<{ sandboxes: Sandbox[] }>('GET', '/v1/sandboxes')).sandboxes;
}

async function recordUntil(h: TestHost, what: string, match: (s: Sandbox) => boolean): Promise<Sandbox> {
  const deadline = Date.now() + 30_000;
  let last: Sandbox[] = [];
  while (Date.now() < deadline) {
    last = await sandboxes(h);
    const found = last.find(match);
    if (found) return found;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no sandbox record ${what} within 30 s; records: ${JSON.stringify(last)}`);
}

test('sandbox records: warm, bound, serving, and gone with why, in /v1/sandboxes', async (t) => {
  const h = await startTestHost(t, { BERTH_WARM_POOL: '1', BERTH_SLOTS: '2', BERTH_IDLE_TIMEOUT: '3s' });
  await h.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const warm = await recordUntil(h, 'warm', (s) => s.phase === 'warm');
  // Listed from its start; handed out once its runner waits for a binding.
  for (let i = 0; i < 600 && h.host.worker.warmPoolStats.ready < 1; i++)
    await new Promise((r) => setTimeout(r, 50));
  assert.equal(h.host.worker.warmPoolStats.ready, 1, 'the warm sandbox became ready within 30 s');
  assert.deepEqual([warm.pooled, warm.sessionId, warm.endReason], [true, null, null]);
  assert.equal(warm.workerId, h.host.worker.id);

  const a = await h.sendAndCollect('a', { agent: 'sh', text: 'echo one' }, replied);
  assert.equal(a.at(-1)?.type, 'reply');
  const generation = (await h.host.store.getSessionView('a', Date.now()))!.generation;
  await recordUntil(
    h,
    'bound to a',
    (s) => s.name === warm.name && s.phase === 'bound' && s.sessionId === 'a',
  );
  assert.equal((await sandboxes(h)).find((s) => s.name === warm.name)?.generation, generation);

  // A long turn, then the engine kills its sandbox: the record says serving, then why it ended.
  await h.client.request('POST', '/v1/sessions/a/messages', { text: 'sleep 60' });
  const serving = await recordUntil(h, 'serving', (s) => s.name === warm.name && s.phase === 'serving');
  assert.ok(serving.turnId, 'a serving sandbox names its turn');
  assert.equal((await h.host.store.getTurn(serving.turnId!))?.status, 'running');
  await h.host.docker.getContainer(warm.name).kill();
  const killed = await recordUntil(
    h,
    'gone after the kill',
    (s) => s.name === warm.name && s.phase === 'gone',
  );
  assert.equal(killed.endReason, 'SandboxExited');
  assert.match(killed.endMessage ?? '', /exit code 137/);
  assert.ok(killed.endedAt !== null && killed.endedAt >= killed.createdAt);

  // A cold sandbox of another session idles out.
  await h.client.request('POST', '/v1/agents', { name: 'big', provider: 'command', memoryMb: 300 });
  const b = await h.sendAndCollect('b', { agent: 'big', text: 'echo two' }, replied);
  assert.equal(b.at(-1)?.type, 'reply');
  const idled = await recordUntil(h, 'b idled out', (s) => s.sessionId === 'b' && s.phase === 'gone');
  assert.deepEqual([idled.pooled, idled.endReason], [false, 'Idle']);
  assert.match(idled.name, /-b-g\d+$/);

  // berth status shows the same records.
  const status = await h.client.request<{ sandboxes: Sandbox[] }>('GET', '/v1/status');
  assert.ok(status.sandboxes.some((s) => s.name === warm.name && s.endReason === 'SandboxExited'));
});
