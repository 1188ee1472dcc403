/**
 * A session's messages are answered in the order they were accepted, and each reply names
 * exactly the message it answers: two messages that share a turn each get their own reply
 * through `berth send --wait`; a message waiting out its backoff after its machine was
 * lost is answered before a later one, which sees the files its retry left.
 */
import assert from 'node:assert/strict';
import { mkdtemp, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ApiClient } from '../src/cli/index.js';
import type { Message, Turn } from '../src/core/index.js';
import { readAdminToken } from '../src/secrets/index.js';
import { workspaceLayout } from '../src/workspace/index.js';
import { startMachines } from './helpers/machines.js';
import {
  berth,
  eventually,
  exited,
  freePort,
  spawnBerth,
  waitForHealthy,
  wipeDataDir,
} from './helpers/processes.js';

test('three messages to one session, two sharing a turn: each `send --wait` prints its own reply and exits with its own code', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-order-'));
  const port = await freePort();
  const env = { ...process.env, BERTH_DATA: dataDir, BERTH_PORT: String(port) };
  const up = spawnBerth(['up', '--slots', '1'], env, dataDir, 'up.log');
  t.after(async () => {
    if (up.exitCode === null && up.signalCode === null) up.kill('SIGTERM');
    await exited(up);
    await wipeDataDir(dataDir);
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHealthy(url, up, join(dataDir, 'up.log'));
  const client = new ApiClient(url, (await readAdminToken(dataDir)) ?? undefined);
  const created = await berth(['agent', 'create', 'sh', '--provider', 'command'], env);
  assert.equal(created.code, 0, created.stderr);

  // Empty until the first message's post has created the session.
  const ofSession = async <T>(what: 'turns' | 'messages'): Promise<T[]> =>
    client.request<Record<string, T[]>>('GET', `/v1/sessions/r1/${what}`).then(
      (body) => body[what]!,
      (err: { code?: string }) => {
        if (err.code === 'SESSION_NOT_FOUND') return [];
        throw err;
      },
    );
  const turns = () => ofSession<Turn>('turns');
  const inbound = async () => (await ofSession<Message>('messages')).filter((m) => m.direction === 'in');
  const accepted = (text: string) =>
    eventually(`message \`${text}\` accepted`, async () => (await inbound()).find((m) => m.text === text));

  const a = berth(['send', 'r1', 'sleep 10; echo reply-A', '--agent', 'sh', '--wait'], env);
  // B and C are posted while A's turn runs, so both wait for its commit and the next turn takes them
  // together. A's 10 s covers two CLI starts one after the other: each takes seconds on a busy machine.
  await eventually('the turn of message A running', async () =>
    (await turns()).some((x) => x.status === 'running') ? true : undefined,
  );
  const b = berth(['send', 'r1', 'echo reply-B; exit 3', '--wait'], env);
  // Accepted before C is sent: B comes first in the session's order.
  const messageB = await accepted('echo reply-B; exit 3');
  const c = berth(['send', 'r1', 'echo reply-C', '--wait'], env);
  const messageC = await accepted('echo reply-C');
  const sent = await Promise.all([a, b, c]);

  const turnOfB = (await turns()).find((x) => x.status === 'committed' && x.messageIds.includes(messageB.id));
  assert.ok(turnOfB, `a committed turn took message B; turns: ${JSON.stringify(await turns())}`);
  assert.ok(
    turnOfB.messageIds.includes(messageC.id),
    `B and C did not share a turn (the timings no longer make them), so this test shows nothing: turns ${JSON.stringify(await turns())}`,
  );
  assert.deepEqual(
    sent.map((s) => ({ stdout: s.stdout, code: s.code })),
    [
      { stdout: 'reply-A\n', code: 0 },
      { stdout: 'reply-B\n', code: 3 },
      { stdout: 'reply-C\n', code: 0 },
    ],
    'each send --wait prints the reply of its own job and exits with its code',
  );
});

test('a machine lost during a turn, and a later message sent while that turn’s message waits to be retried: the later one is answered after it, on the files its retry left', async (t) => {
  // A first backoff of 5 s (1 s by default): the fourth message is surely posted while the third waits it out.
  const { client, store, addMachine, destroy } = await startMachines(t, { env: { BERTH_RETRY_BASE: '5s' } });
  await client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  const session = 's';
  const post = async (text: string) => {
    const body = { agent: 'sh', text };
    const posted = await client.request<{ message: Message }>(
      'POST',
      `/v1/sessions/${session}/messages`,
      body,
    );
    return posted.message;
  };
  const settled = (id: number) =>
    eventually(
      `message ${id} answered or failed`,
      async () => {
        const m = (await store.listMessages(session, id - 1, 1))[0];
        return m && (m.status === 'done' || m.status === 'failed') ? m : undefined;
      },
      // The third message's retry runs its `sleep 30` through.
      180_000,
    );

  // A long idle timeout keeps the session bound to A between turns: its third turn runs there even once B has joined.
  const a = await addMachine('a', { BERTH_IDLE_TIMEOUT: '10m' });
  for (const text of ['echo one > one.txt', 'cat one.txt'])
    assert.equal((await settled((await post(text)).id)).status, 'done', `\`${text}\` answered on machine A`);
  // B is up before A dies: a live worker is there to take the fourth message while the third waits out its backoff.
  await addMachine('b');

  const third = await post('echo half-written >> f.txt; sleep 30');
  const layout = workspaceLayout(a.dataDir);
  const thirdTurn = await eventually(
    'the third message’s turn running, its line written to its attempt layer',
    async () => {
      const turn = (await store.listTurns(session)).find(
        (x) => x.status === 'running' && x.messageIds.includes(third.id),
      );
      if (!turn) return undefined;
      const written = await stat(join(layout.layerPath(session, turn.id), 'upper', 'f.txt')).then(
        () => true,
        () => false,
      );
      return written ? turn : undefined;
    },
    60_000,
  );
  assert.equal(thirdTurn.workerId, await a.workerId(), 'the third message runs on machine A');
  await destroy(a);
  // The lease expires and a sweep aborts the turn: the third message is pending again, in backoff.
  await eventually(
    'the third message retrying after the sweep',
    async () =>
      (await store.eventsAfter(session, 0, 1000)).find(
        (e) => e.type === 'retrying' && e.data.messageId === third.id,
      ),
    60_000,
  );
  const fourth = await post('cat f.txt');
  const thirdWhenFourthPosted = (await store.listMessages(session, third.id - 1, 1))[0]!;
  assert.ok(
    thirdWhenFourthPosted.status === 'pending' && thirdWhenFourthPosted.processAfter > fourth.createdAt,
    `the fourth message was posted while the third waited out its backoff: ${JSON.stringify(thirdWhenFourthPosted)}, fourth ${JSON.stringify(fourth)}`,
  );
  const thirdDone = await settled(third.id);
  await settled(fourth.id);
  assert.equal(thirdDone.status, 'done', `the third message was answered: ${JSON.stringify(thirdDone)}`);

  const turns = (await store.listTurns(session)).sort((x, y) => x.startedAt - y.startedAt);
  const thirdSettledBy = turns.filter((x) => x.status === 'committed' && x.messageIds.includes(third.id));
  assert.equal(
    thirdSettledBy.length,
    1,
    `one committed turn answered the third message: ${JSON.stringify(turns)}`,
  );
  const committedThird = thirdSettledBy[0]!;
  for (const turn of turns.filter((x) => x.messageIds.includes(fourth.id))) {
    const joinedAfterThird =
      turn.messageIds.includes(third.id) &&
      turn.messageIds.indexOf(third.id) < turn.messageIds.indexOf(fourth.id);
    assert.ok(
      joinedAfterThird || turn.startedAt >= committedThird.endedAt!,
      `the fourth message's turn ${turn.id} started at ${turn.startedAt}, before the third message was answered ` +
        `(its turn ${committedThird.id} ended at ${committedThird.endedAt}); turns: ${JSON.stringify(turns)}`,
    );
  }
  const repliesToFourth = (await store.eventsAfter(session, 0, 1000)).filter(
    (e) => e.type === 'reply' && (e.data.inReplyTo as number[]).includes(fourth.id),
  );
  assert.equal(
    repliesToFourth.length,
    1,
    `one reply to the fourth message: ${JSON.stringify(repliesToFourth)}`,
  );
  assert.equal(
    repliesToFourth[0]!.data.text,
    'half-written\n',
    'the fourth message sees f.txt as the retry left it: the killed attempt’s line gone, the retry’s once',
  );
});
