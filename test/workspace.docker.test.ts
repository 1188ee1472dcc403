/**
 * Transactional turns against real sandboxes: a killed turn's partial writes and state
 * vanish, the retry sees only committed content, a background process never outlives
 * its turn, and nothing of a sandbox remains once it is gone.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import type { ScriptPlan } from '../src/core/index.js';
import { listMounts } from '../src/workspace/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';
import { availableTiers, type Tier } from './helpers/tiers.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);

// On gVisor every turn runs in a fresh sandbox whose layer was mounted before it started (docs/isolation.md).
for (const { tier, skip } of await availableTiers()) {
  test(
    `a turn killed after writing partial state leaves nothing; the retry sees only committed content (${tier})`,
    { skip },
    (t) => transactionalTurns(t, tier),
  );
}

async function transactionalTurns(t: TestContext, tier: Tier): Promise<void> {
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t);
  await client.request('POST', '/v1/agents', { name: 'tx', provider: 'script', isolation: tier });
  const reply = (e: { type: string }) => e.type === 'reply';
  await sendAndCollect(
    'w1',
    {
      agent: 'tx',
      text: plan({
        steps: [{ write: { path: 'log.txt', content: 'one\n' } }, { putState: { key: 'turns', value: 1 } }],
      }),
    },
    reply,
  );

  // Turn 2 checks it starts from committed state, writes half its work, and on its first try is killed mid-way.
  const turn2 = plan({
    steps: [
      { assertFile: { path: 'log.txt', equals: 'one\n' } },
      { assertState: { key: 'turns', equals: 1 } },
      { append: { path: 'log.txt', content: 'two-a\n' } },
      { putState: { key: 'turns', value: 2 } },
      { run: 'tail -f log.txt > /dev/null 2>&1 &' },
      { run: 'if [ "$BERTH_ATTEMPT" = 1 ]; then kill -KILL $BERTH_RUNNER_PID; sleep 5; fi' },
      { append: { path: 'log.txt', content: 'two-b\n' } },
    ],
    reply: 'two',
  });
  const events = await sendAndCollect('w1', { agent: 'tx', text: turn2 }, reply);
  assert.equal(events.filter((e) => e.type === 'started').length, 2);

  // Turn 3 (same sandbox on runc) checks turn 2's committed result and that its tail -f is gone.
  const turn3 = plan({
    steps: [
      { assertFile: { path: 'log.txt', equals: 'one\ntwo-a\ntwo-b\n' } },
      { assertState: { key: 'turns', equals: 2 } },
      { run: '! pgrep -x tail' },
      { run: 'rm log.txt' },
    ],
    reply: 'three',
  });
  await sendAndCollect('w1', { agent: 'tx', text: turn3 }, reply);
  const turns = await host.store.listTurns('w1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['committed', 'aborted', 'committed', 'committed'],
  );
  assert.equal((await host.store.getSessionView('w1', Date.now()))?.workspaceVersion, 3);
  // The reply is out at the store commit; promotion follows right after it.
  await waitPromoted(host, 'w1');
  assert.deepEqual(await host.store.getState('w1'), { turns: 2 });
  await assert.rejects(
    readFile(join(dataDir, 'workspaces', 'w1', 'committed', 'log.txt')),
    /ENOENT/,
    'the delete is promoted',
  );

  // Once the host is gone: no container, mount, slot or attempt layer of this install remains.
  await host.close();
  assert.deepEqual(
    await host.docker.listContainers({
      all: true,
      filters: { label: [`berth.install=${host.worker.installId}`] },
    }),
    [],
  );
  assert.deepEqual(
    (await listMounts()).filter(
      (m) => m.mountPoint.startsWith(dataDir) && m.mountPoint !== join(dataDir, 'slots'),
    ),
    [],
  );
  assert.deepEqual(await readdir(join(dataDir, 'slots')), []);
  assert.deepEqual(await readdir(join(dataDir, 'workspaces', 'w1', 'layers')), []);
}
