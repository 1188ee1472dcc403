/**
 * A worker's SIGTERM (a deploy, `kubectl drain`, a scale-down) drains it, on real worker
 * processes sharing PostgreSQL and S3: its running turn finishes and commits where it runs,
 * with no try spent and nothing redone, a message posted meanwhile is answered by another
 * worker after it, and the worker exits by itself. A turn that outlives the drain's grace goes
 * back to the queue without spending a try and is answered elsewhere: a job that took a
 * checkpoint resumes from it on the next machine.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Message } from '../src/core/index.js';
import { berthCli, startMachines } from './helpers/machines.js';
import { eventually, exited } from './helpers/processes.js';

type Cluster = Awaited<ReturnType<typeof startMachines>>;

const post = async ({ client }: Cluster, session: string, text: string) =>
  (
    await client.request<{ message: Message }>('POST', `/v1/sessions/${session}/messages`, {
      agent: 'sh',
      text,
    })
  ).message;

const settled = ({ store }: Cluster, session: string, m: Message) =>
  eventually(
    `message ${m.id} answered or failed`,
    async () => {
      const now = (await store.listMessages(session, m.id - 1, 1))[0];
      return now && (now.status === 'done' || now.status === 'failed') ? now : undefined;
    },
    120_000,
  );

const runningTurn = ({ store }: Cluster, session: string) =>
  eventually(
    `a turn of ${session} running`,
    async () => (await store.listTurns(session)).find((x) => x.status === 'running'),
    60_000,
  );

const replyTo = async ({ store }: Cluster, session: string, m: Message) =>
  (await store.eventsAfter(session, 0, 1000)).find(
    (e) => e.type === 'reply' && (e.data.inReplyTo as number[]).includes(m.id),
  )?.data.text;

test('a worker’s SIGTERM drains it: the running turn commits where it runs, no try spent; a message posted meanwhile is answered elsewhere, after it; the worker exits', async (t) => {
  const cluster = await startMachines(t);
  await cluster.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const machines = [await cluster.addMachine('a'), await cluster.addMachine('b')];
  const first = await post(cluster, 'd1', 'sleep 6; echo one >> f.txt; echo first');
  const turn = await runningTurn(cluster, 'd1');
  const ids = await Promise.all(machines.map((m) => m.workerId()));
  const draining = machines[ids.indexOf(turn.workerId)]!;
  const other = machines.find((m) => m !== draining)!;

  draining.child.kill('SIGTERM');
  const second = await post(cluster, 'd1', 'cat f.txt');
  const firstDone = await settled(cluster, 'd1', first);
  const secondDone = await settled(cluster, 'd1', second);
  const code = await exited(draining.child);
  assert.equal(code, 0, 'the drained worker exited by itself, cleanly');

  assert.deepEqual(
    [firstDone.status, firstDone.tries],
    ['done', 1],
    'the running turn committed on its first try',
  );
  assert.equal(await replyTo(cluster, 'd1', first), 'first\n');
  assert.equal(secondDone.status, 'done');
  assert.equal(
    await replyTo(cluster, 'd1', second),
    'one\n',
    'the later message ran on the files the drained turn left',
  );
  const turns = (await cluster.store.listTurns('d1')).sort((x, y) => x.startedAt - y.startedAt);
  assert.deepEqual(
    turns.map((x) => [x.status, x.workerId]),
    [
      ['committed', turn.workerId],
      ['committed', await other.workerId()],
    ],
    `nothing aborted or redone, the later message on the other worker: ${JSON.stringify(turns)}`,
  );
});

test('a job that outlives the drain’s grace goes back to the queue without spending a try, and the next worker resumes it from its last checkpoint', async (t) => {
  const cluster = await startMachines(t);
  await cluster.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const a = await cluster.addMachine('a', { BERTH_DRAIN_GRACE: '1s' });
  const message = await post(
    cluster,
    'd2',
    'if [ -n "$BERTH_CHECKPOINT" ]; then echo "resumed at $BERTH_CHECKPOINT: $(cat part1.txt)"; exit 0; fi; ' +
      'echo one > part1.txt; berth-checkpoint part-1; sleep 30; echo not resumed',
  );
  const turn = await runningTurn(cluster, 'd2');
  assert.equal(turn.workerId, await a.workerId());
  await eventually(
    'the job’s checkpoint recorded',
    async () => (await cluster.store.listCheckpoints('d2', message.id)).length > 0 || undefined,
    60_000,
  );

  a.child.kill('SIGTERM');
  assert.equal(await exited(a.child), 0, 'the worker exited by itself once the grace ran out');
  const [aborted] = await cluster.store.listTurns('d2');
  assert.deepEqual([aborted?.status, aborted?.errorCode], ['aborted', 'WORKER_STOPPING']);
  const [waiting] = await cluster.store.listMessages('d2', 0, 1);
  assert.deepEqual(
    [waiting?.status, waiting?.tries],
    ['pending', 0],
    'back in the queue, its try given back',
  );

  await cluster.addMachine('b');
  const done = await settled(cluster, 'd2', message);
  assert.deepEqual([done.status, done.tries], ['done', 1]);
  assert.equal(
    await replyTo(cluster, 'd2', message),
    'resumed at 1:part-1: one\n',
    'the retry on the next machine started from the checkpoint the drained job took',
  );
});

test('berth worker drain: the worker shows as draining, finishes its turn, and stops; an unknown worker is refused with the fix', async (t) => {
  const cluster = await startMachines(t);
  await cluster.client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const a = await cluster.addMachine('a');
  const id = await a.workerId();
  // Long enough that the drain and `berth status` (two CLI runs, slow on a loaded machine) land while it runs.
  const message = await post(cluster, 'd3', 'sleep 10; echo drained');
  await runningTurn(cluster, 'd3');

  const drained = await berthCli(cluster, ['worker', 'drain', id]);
  assert.equal(drained.code, 0, drained.stderr);
  assert.match(drained.stdout, new RegExp(`worker ${id} draining`));
  const status = await berthCli(cluster, ['status']);
  assert.match(status.stdout, new RegExp(`draining: ${id}`), 'berth status names the draining worker');
  assert.equal(await exited(a.child), 0, 'the worker stopped by itself once its turn was done');
  const done = await settled(cluster, 'd3', message);
  assert.deepEqual([done.status, done.tries], ['done', 1]);
  assert.equal(await replyTo(cluster, 'd3', message), 'drained\n');

  const unknown = await berthCli(cluster, ['worker', 'drain', 'no-such-worker']);
  assert.notEqual(unknown.code, 0);
  assert.match(unknown.stderr, /Worker no-such-worker does not exist/);
  assert.match(unknown.stderr, /berth status/);
});
