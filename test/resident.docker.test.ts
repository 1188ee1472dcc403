/**
 * Resident mode end to end (issue 7, item 5): one sandbox keeps a session's processes
 * across turns and idle periods; a process that leaks memory on purpose gets the sandbox
 * recycled by the agent's policy, between turns; state and the workspace survive the
 * recycle, the leaking process does not, and no message is lost. An operator's recycle
 * request is honoured the same way.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ScriptPlan } from '../src/core/index.js';
import { startTestHost } from './helpers/test-host.js';

const plan = (p: ScriptPlan) => JSON.stringify(p);
const reply = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';
/** Waits, idle, until /tmp/leak exists, then holds 8 MiB more every 50 ms up to 320 MiB. */
const LEAKER =
  'perl -e \'until (-e "/tmp/leak") { select(undef, undef, undef, 0.05) } my @held;' +
  ' while (1) { push @held, "x" x (8 << 20) if @held < 40; select(undef, undef, undef, 0.05) }\'';

test('resident: processes outlive turns; a leak gets the sandbox recycled between turns; state, workspace and messages survive', async (t) => {
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, { BERTH_IDLE_TIMEOUT: '1s' });
  await client.request('POST', '/v1/agents', {
    name: 'keeper',
    provider: 'script',
    mode: 'resident',
    memoryMb: 768,
    recycle: { maxRssMb: 200 },
  });
  const send = async (p: ScriptPlan) => {
    const events = await sendAndCollect('r1', { agent: 'keeper', text: plan(p) }, reply);
    assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events.at(-1)));
  };
  await send({
    steps: [
      { run: `${LEAKER} > /dev/null 2>&1 & echo $! > /tmp/leaker.pid` },
      { write: { path: 'notes.txt', content: 'kept in place\n' } },
      { putState: { key: 'checkpoint', value: 'v1' } },
    ],
    reply: 'started',
  });
  // Longer than the idle timeout: an ephemeral sandbox would be gone, with its processes.
  await new Promise((r) => setTimeout(r, 2500));
  await send({
    steps: [{ run: 'kill -0 "$(cat /tmp/leaker.pid)"' }, { run: 'touch /tmp/leak' }],
    reply: 'the process from turn 1 is alive; leaking now',
  });
  const [turn1] = await host.store.listTurns('r1');
  // The leak passes maxRssMb; the sandbox is replaced between turns: the session is released.
  for (let i = 0; i < 300 && (await host.store.getSessionView('r1', Date.now()))?.sandbox; i++)
    await new Promise((r) => setTimeout(r, 100));
  assert.equal((await host.store.getSessionView('r1', Date.now()))?.sandbox, null, 'recycled');
  const released = (await readFile(join(dataDir, 'host.log'), 'utf8'))
    .split('\n')
    .filter((line) => line.includes('Session released'));
  assert.match(
    released.join('\n'),
    /"reason":"Recycled","message":"recycled: resident set \d+ MiB over 200 MiB"/,
  );

  await send({
    steps: [
      { assertState: { key: 'checkpoint', equals: 'v1' } },
      { assertFile: { path: 'notes.txt', equals: 'kept in place\n' } },
      { run: 'test ! -e /tmp/leaker.pid && ! pgrep -x perl' },
    ],
    reply: 'fresh sandbox, state and workspace kept',
  });
  const turns = await host.store.listTurns('r1');
  assert.equal(turns.length, 3);
  assert.ok(
    turns.every((x) => x.status === 'committed' && x.attempt === 1),
    'no turn was cut or retried',
  );
  assert.ok(turns.at(-1)!.generation > turn1!.generation, 'a new generation serves the session');

  // On demand: the operator's request replaces the (idle) sandbox too.
  const before = (await host.store.getSessionView('r1', Date.now()))!.generation;
  await client.request('POST', '/v1/sessions/r1/recycle');
  for (let i = 0; i < 300 && (await host.store.getSessionView('r1', Date.now()))?.sandbox; i++)
    await new Promise((r) => setTimeout(r, 100));
  assert.match(
    await readFile(join(dataDir, 'host.log'), 'utf8'),
    /"reason":"Recycled","message":"recycled: recycle requested"/,
  );
  await send({ steps: [{ assertState: { key: 'checkpoint', equals: 'v1' } }], reply: 'after the request' });
  assert.ok((await host.store.getSessionView('r1', Date.now()))!.generation > before);
});

test('resident: recycle without mode resident is refused with the fix', async (t) => {
  const { client } = await startTestHost(t);
  await assert.rejects(
    client.request('POST', '/v1/agents', { name: 'eph', provider: 'script', recycle: { maxAgeMs: 60_000 } }),
    (err: Error & { code?: string }) => {
      assert.equal(err.code, 'INVALID_INPUT');
      assert.match(err.message, /set "mode": "resident"/);
      return true;
    },
  );
});
