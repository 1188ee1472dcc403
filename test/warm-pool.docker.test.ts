/**
 * The warm pool against the real engine: a session is bound to a pre-booted sandbox, a
 * bound sandbox serves exactly one session, an empty pool falls back to a cold start, the
 * pool refills, and a warm sandbox that dies before binding is replaced and never bound.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { LABELS } from '../src/core/index.js';
import { startTestHost, type TestHost } from './helpers/test-host.js';

const replied = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

async function until<T>(what: string, probe: () => Promise<T | null | undefined | false>, ms = 30_000) {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Names of this host's running warm (pool-labelled) containers. */
async function warmContainers(h: TestHost): Promise<string[]> {
  const list = await h.host.docker.listContainers({
    filters: { label: [`${LABELS.install}=${h.host.worker.installId}`, LABELS.pool], status: ['running'] },
  });
  return list.map((c) => (c.Names[0] ?? '').replace(/^\//, '')).sort();
}

async function sandboxesOfTurns(h: TestHost, sessionId: string): Promise<string[]> {
  const turns = await h.host.store.listTurns(sessionId);
  return turns.map((t) => t.sandbox ?? '');
}

test('warm pool: sessions bind pre-booted sandboxes, one session each; an empty pool starts cold; the pool refills', async (t) => {
  const h = await startTestHost(t, { BERTH_WARM_POOL: '1', BERTH_SLOTS: '2', BERTH_IDLE_TIMEOUT: '60s' });
  await h.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const ready = await until('one ready warm sandbox', async () => h.host.worker.warmPoolStats.ready === 1);
  assert.ok(ready);
  const [warmName] = await warmContainers(h);
  assert.ok(warmName, 'the pool holds a running, unbound sandbox');

  const a = await h.sendAndCollect('a', { agent: 'sh', text: 'echo from-a' }, replied);
  assert.equal(a.at(-1)?.type, 'reply');
  assert.deepEqual(await sandboxesOfTurns(h, 'a'), [warmName], 'session a ran in the warm sandbox');
  await h.sendAndCollect('a', { text: 'echo again' }, replied);
  assert.deepEqual(await sandboxesOfTurns(h, 'a'), [warmName, warmName], 'a keeps its sandbox between turns');

  // Another profile (more memory) has no warm sandbox yet: its first session starts cold.
  await h.client.request('POST', '/v1/agents', { name: 'big', provider: 'command', memoryMb: 300 });
  const b = await h.sendAndCollect('b', { agent: 'big', text: 'echo from-b' }, replied);
  assert.equal(b.at(-1)?.type, 'reply');
  const [bSandbox] = await sandboxesOfTurns(h, 'b');
  assert.match(bSandbox!, /-b-g\d+$/, 'an empty pool falls back to a cold start');

  // The pool refills behind the take, and the profile now in use gets warm sandboxes of its own.
  await until('both profiles warm', async () => h.host.worker.warmPoolStats.ready >= 2);
  const e = await h.sendAndCollect('e', { agent: 'big', text: 'echo from-e' }, replied);
  assert.equal(e.at(-1)?.type, 'reply');
  const [eSandbox] = await sandboxesOfTurns(h, 'e');
  assert.match(eSandbox!, /-pool-/, 'the refilled pool serves the next session of that profile');
  const inspect = await h.host.docker.getContainer(eSandbox!).inspect();
  assert.equal(inspect.HostConfig.Memory, 300 * 1024 * 1024, 'with the resources of its profile');

  const all = [warmName, bSandbox, eSandbox];
  assert.equal(new Set(all).size, 3, `one sandbox per session, never shared: ${all}`);
  const stats = h.host.worker.warmPoolStats;
  assert.ok(stats.hits >= 2 && stats.misses >= 1, JSON.stringify(stats));
});

test('warm pool: a warm sandbox killed before binding is replaced and never bound', async (t) => {
  const h = await startTestHost(t, { BERTH_WARM_POOL: '1', BERTH_SLOTS: '1' });
  await h.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  await until('a ready warm sandbox', async () => h.host.worker.warmPoolStats.ready === 1);
  const [victim] = await warmContainers(h);
  await h.host.docker.getContainer(victim!).kill();
  const replacement = await until('a replacement warm sandbox', async () => {
    const names = await warmContainers(h);
    return h.host.worker.warmPoolStats.ready === 1 && names.find((n) => n !== victim);
  });
  const events = await h.sendAndCollect('s', { agent: 'sh', text: 'echo hi' }, replied);
  assert.equal(events.at(-1)?.type, 'reply');
  assert.deepEqual(
    events.filter((e) => e.type === 'retrying'),
    [],
    'the dead sandbox cost no try',
  );
  assert.deepEqual(await sandboxesOfTurns(h, 's'), [replacement]);
  const everBound = (await h.host.store.listSessionViews(Date.now())).map((s) => s.sandbox);
  assert.ok(!everBound.includes(victim!), 'the killed warm sandbox was never bound');
  await until('the victim to be removed', async () => {
    const all = await h.host.docker.listContainers({ all: true, filters: { name: [victim!] } });
    return all.length === 0;
  });
});
