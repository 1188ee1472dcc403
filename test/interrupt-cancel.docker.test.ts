/**
 * Interrupt and cancel through a real host (its worker on Docker, a `command` agent) and the CLI:
 * a turn running `sleep 30` is interrupted with `berth interrupt` and ends `interrupted`
 * long before its job would have, its message `interrupted`, its file discarded; a message
 * taken back with `berth send --cancel` while it waited is never run; the message queued
 * behind them runs next and its reply is committed. With nothing running, the interrupt
 * and the cancel of an answered message are refused with their codes. With the API and the
 * worker in two processes sharing PostgreSQL, the worker hears of the interrupt through the
 * store.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message, Turn } from '../src/core/index.js';
import { startMachines } from './helpers/machines.js';
import { berth, eventually } from './helpers/processes.js';
import { startTestHost } from './helpers/test-host.js';

test('a running `sleep 30` interrupted ends at once and discards its work; a cancelled message never runs; the next one is answered', async (t) => {
  // The host runs in this process (its worker real, against Docker); the CLI reaches it over HTTP.
  const { host, client, dataDir } = await startTestHost(t);
  const env = { ...process.env, BERTH_DATA: dataDir, BERTH_URL: host.url, BERTH_TOKEN: host.adminToken };
  const created = await berth(['agent', 'create', 'sh', '--provider', 'command'], env);
  assert.equal(created.code, 0, created.stderr);

  const post = async (text: string) =>
    (
      await client.request<{ message: Message }>('POST', '/v1/sessions/r1/messages', {
        agent: 'sh',
        text,
      })
    ).message;
  const turns = async () => (await client.request<{ turns: Turn[] }>('GET', '/v1/sessions/r1/turns')).turns;
  const messages = async () =>
    (await client.request<{ messages: Message[] }>('GET', '/v1/sessions/r1/messages')).messages;

  const long = await post('echo partial > f.txt; sleep 30; echo never');
  const running = await eventually('the long turn running', async () =>
    (await turns()).find((x) => x.status === 'running' && x.messageIds.includes(long.id)),
  );
  const next = await post('cat f.txt 2>/dev/null || echo no-file');
  const takenBack = await post('echo cancelled > c.txt; echo must-not-run');

  const cancel = await berth(['send', 'r1', '--cancel', String(takenBack.id)], env);
  assert.equal(cancel.code, 0, cancel.stderr);
  assert.match(cancel.stdout, new RegExp(`message ${takenBack.id} of r1 cancelled`));

  const askedAt = Date.now();
  const interrupt = await berth(['interrupt', 'r1'], env);
  assert.equal(interrupt.code, 0, interrupt.stderr);
  assert.match(interrupt.stdout, new RegExp(`turn ${running.id} of r1 is being interrupted`));
  const ended = await eventually('the long turn interrupted', async () =>
    (await turns()).find((x) => x.id === running.id && x.status !== 'running'),
  );
  const interruptMs = Date.now() - askedAt;
  t.diagnostic(`interrupt → turn ended: ${interruptMs} ms (CLI start included)`);
  assert.equal(ended.status, 'interrupted');
  assert.equal(ended.errorCode, 'TURN_INTERRUPTED');
  assert.ok(
    ended.endedAt! - running.startedAt < 30_000,
    `the turn ended before its sleep would have: ${ended.endedAt! - running.startedAt} ms`,
  );

  const answered = await eventually(
    'the next message answered',
    async () =>
      (await messages()).find((m) => m.id === next.id && m.status !== 'pending' && m.status !== 'processing'),
    60_000,
  );
  assert.equal(answered.status, 'done');
  const all = await messages();
  const replies = all.filter((m) => m.direction === 'out');
  assert.deepEqual(
    replies.map((r) => ({ text: r.text, inReplyTo: r.inReplyTo })),
    [{ text: 'no-file\n', inReplyTo: [next.id] }],
    'one reply, to the next message, on a workspace without the interrupted turn’s file',
  );
  const byId = new Map(all.map((m) => [m.id, m]));
  assert.equal(byId.get(long.id)?.status, 'interrupted');
  assert.equal(byId.get(long.id)?.errorCode, 'TURN_INTERRUPTED');
  assert.equal(byId.get(long.id)?.tries, 1, 'not retried');
  assert.equal(byId.get(takenBack.id)?.status, 'cancelled');
  assert.equal(byId.get(takenBack.id)?.tries, 0, 'never taken by a turn');
  assert.ok(
    (await turns()).every((x) => !x.messageIds.includes(takenBack.id)),
    'no turn took the cancelled message',
  );

  // Nothing runs now: the interrupt is refused; an answered message is not taken back.
  const nothing = await berth(['interrupt', 'r1'], env);
  assert.notEqual(nothing.code, 0, nothing.stdout);
  await assert.rejects(
    client.request('POST', '/v1/sessions/r1/interrupt'),
    (e: { code?: string }) => e.code === 'NO_RUNNING_TURN',
  );
  await assert.rejects(
    client.request('DELETE', `/v1/sessions/r1/messages/${next.id}`),
    (e: { code?: string }) => e.code === 'MESSAGE_NOT_PENDING',
  );
});

test('the API and the worker in two processes on PostgreSQL: the worker hears of the interrupt through the store and the session goes on', async (t) => {
  // A 10 s lease: the worker's polling floor for a lost hint is 2 s, so an interrupt seen
  // sooner came by the store's notification (LISTEN/NOTIFY).
  const { client, store, addMachine } = await startMachines(t, { leaseMs: 10_000 });
  await client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  await addMachine('a');
  const post = async (text: string) =>
    (await client.request<{ message: Message }>('POST', '/v1/sessions/p1/messages', { agent: 'sh', text }))
      .message;
  const long = await post('sleep 30');
  const running = await eventually(
    'the long turn running',
    async () =>
      (await store.listTurns('p1')).find((x) => x.status === 'running' && x.messageIds.includes(long.id)),
    90_000,
  );
  const next = await post('echo next');
  const askedAt = Date.now();
  const asked = await client.request<{ turn: Turn }>('POST', `/v1/sessions/p1/interrupt?turn=${running.id}`);
  assert.equal(asked.turn.interruptRequestedAt !== null, true);
  const ended = await eventually('the long turn ended', async () => {
    const turn = await store.getTurn(running.id);
    return turn?.status === 'running' ? undefined : turn;
  });
  t.diagnostic(`interrupt → turn ended, across processes: ${Date.now() - askedAt} ms`);
  assert.equal(ended?.status, 'interrupted');
  const answered = await eventually(
    'the next message answered',
    async () => {
      const m = (await store.listMessages('p1', next.id - 1, 1))[0];
      return m && m.status !== 'pending' && m.status !== 'processing' ? m : undefined;
    },
    90_000,
  );
  assert.equal(answered.status, 'done');
  const statuses = (await store.listMessages('p1', 0, 10)).map((m) => [m.direction, m.text, m.status]);
  assert.deepEqual(statuses, [
    ['in', 'sleep 30', 'interrupted'],
    ['in', 'echo next', 'done'],
    ['out', 'next\n', 'done'],
  ]);
});
