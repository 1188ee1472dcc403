/**
 * Bounded disks with real sandboxes: under a tiny cache budget an idle session's copy is
 * evicted and its next turn finds every committed file (materialised from the chain); a
 * data dir that fills up during a turn's commit fails that turn with DISK_FULL, commits
 * nothing of it, and its retry commits whole.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import type { ScriptPlan } from '../src/core/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';

const run = promisify(execFile);
const plan = (p: ScriptPlan) => JSON.stringify(p);
const reply = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

test('under a small budget an idle copy is evicted, and the next turn finds every committed file', async (t) => {
  // 1 byte: every copy no sandbox uses is over it. A sandbox per turn: released after each.
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
    BERTH_CACHE_BYTES: '1',
    BERTH_IDLE_TIMEOUT: '0',
  });
  await client.request('POST', '/v1/agents', { name: 'cache', provider: 'script' });
  /** A turn of the script agent on e1; its last event is its reply (a failure fails the test). */
  const turn = async (steps: ScriptPlan['steps'], text: string) => {
    const events = await sendAndCollect('e1', { agent: 'cache', text: plan({ steps, reply: text }) }, reply);
    assert.equal(events.at(-1)?.type, 'reply', JSON.stringify(events));
  };
  await turn(
    [
      { write: { path: 'notes/a.txt', content: 'alpha\n' } },
      { run: 'head -c 300000 /dev/urandom > blob.bin && sha256sum blob.bin > blob.sum' },
    ],
    'one',
  );
  await waitPromoted(host, 'e1');
  const committed = join(dataDir, 'workspaces', 'e1', 'committed');
  // Evicted by the pass that follows the session's release.
  for (let i = 0; i < 200 && (await exists(committed)); i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(await exists(committed), false, 'the idle copy is evicted');
  assert.equal(host.worker.workspaceCacheStats.evictions, 1);

  await turn(
    [{ assertFile: { path: 'notes/a.txt', equals: 'alpha\n' } }, { run: 'sha256sum -c blob.sum' }],
    'two',
  );
  const stats = host.worker.workspaceCacheStats;
  assert.equal(stats.budgetBytes, 1);
  assert.ok(stats.misses >= 1, JSON.stringify(stats));
  const metrics = await (
    await fetch(`${host.url}/metrics`, { headers: { authorization: `Bearer ${host.adminToken}` } })
  ).text();
  assert.match(metrics, /^berth_workspace_cache_evictions_total [1-9]/m);
  assert.match(metrics, /^berth_workspace_cache_misses_total [1-9]/m);
});

test('a data dir filled during a commit fails the turn with DISK_FULL; nothing of it is committed, and its retry commits', async (t) => {
  // The workspaces on a small disk of their own; the store, blobs and logs elsewhere.
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-full-'));
  const workspaces = join(dataDir, 'workspaces');
  await mkdir(workspaces);
  await run('mount', ['-t', 'tmpfs', '-o', 'size=96m', 'tmpfs', workspaces]);
  const { host, client, sendAndCollect } = await startTestHost(
    t,
    { BERTH_RETRY_BASE: '200ms' },
    { dataDir, beforeRemove: () => run('umount', ['-l', workspaces]).then(() => undefined) },
  );
  await client.request('POST', '/v1/agents', { name: 'full', provider: 'script' });
  // Its first try writes 60 MiB that fit, but not again as the layer's archive; the retry writes a little.
  const events = await sendAndCollect(
    'f1',
    {
      agent: 'full',
      text: plan({
        steps: [
          {
            run: 'if [ "$BERTH_ATTEMPT" = 1 ]; then head -c 60M /dev/urandom > big.bin; else echo small > small.txt; fi',
          },
        ],
        reply: 'done',
      }),
    },
    reply,
  );
  assert.equal(events.at(-1)?.type, 'reply', JSON.stringify(events));
  const turns = await host.store.listTurns('f1');
  assert.deepEqual(
    turns.map((x) => [x.status, x.errorCode]),
    [
      ['aborted', 'DISK_FULL'],
      ['committed', null],
    ],
  );
  await waitPromoted(host, 'f1');
  const committed = join(workspaces, 'f1', 'committed');
  assert.deepEqual(await readdir(committed), ['small.txt']);
  // The aborted try's layer is gone: the disk has its space back.
  assert.deepEqual(await readdir(join(workspaces, 'f1', 'layers')).catch(() => []), []);
});

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}
