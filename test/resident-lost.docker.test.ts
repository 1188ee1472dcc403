/**
 * A resident session follows its workspace, and never runs on the wrong files. A resident
 * agent writes its workspace in place, on the machine that runs it, and the worker captures
 * it into the session's chain after each commit: two workers on separate data dirs
 * ("machines") share one PostgreSQL store and one bucket. Machine A runs turns that write
 * files, then dies with its disk; machine B is given the next message and answers it on the
 * files materialised from the capture. When A died after a commit and before its capture
 * (a failpoint), B must not run on older files: the turn fails with RESIDENT_WORKSPACE_LOST,
 * naming A's data dir and the time of the last turn that wrote there, no reply is committed
 * and the message stays, held, until the operator accepts the loss (reset-workspace) or A's
 * disk comes back (resume). A worker SIGKILLed and restarted on the same data dir is not
 * refused: its disk holds the files.
 * Between turns a resident session's sandbox is live: a command run in it (exec) goes from
 * the API to the worker holding it, and a worker SIGKILLed mid-command ends the stream with
 * SANDBOX_RESTARTED, never a silent cut.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import { Berth } from '../src/client/index.js';
import type { ExecLine } from '../src/core/index.js';
import { failpointEnv } from './helpers/failpoint-preload.js';
import { berthCli as cli, startMachines } from './helpers/machines.js';
import { eventually, exited } from './helpers/processes.js';

type Client = Awaited<ReturnType<typeof startMachines>>['client'];

type Outcome = { type: string; data: Record<string, unknown> };
/** What the test reads of a session view. */
type View = { id: string; status: string; hold?: { code: string; message: string } | null };

/** Posts a message; follows the session's events until `until` says the message's outcome is known. */
async function post(client: Client, session: string, text: string) {
  return client.request<{ eventId: number; message: { id: number } }>(
    'POST',
    `/v1/sessions/${session}/messages`,
    { agent: 'res', text },
  );
}

async function outcome(
  client: Client,
  session: string,
  afterEventId: number,
  until: (e: Outcome) => boolean,
): Promise<Outcome> {
  for await (const e of client.events(session, afterEventId, AbortSignal.timeout(120_000)))
    if (until(e)) return e;
  throw new Error('event stream ended');
}

const repliedTo = (id: number) => (e: Outcome) =>
  (e.type === 'reply' && (e.data.inReplyTo as number[]).includes(id)) ||
  (e.type === 'failed' && e.data.messageId === id) ||
  e.type === 'held';

async function send(client: Client, session: string, text: string): Promise<Outcome> {
  const posted = await post(client, session, text);
  return outcome(client, session, posted.eventId, repliedTo(posted.message.id));
}

const WRITE_TWO_TURNS = [
  'echo one > f.txt',
  'head -c 3000000 /dev/urandom > big.bin && sha256sum big.bin > sum.txt',
];
const CHECK = 'cat f.txt; sha256sum -c sum.txt';

/** Machine A, serving a resident `command` agent's session (an 8 MiB workspace) whose two turns wrote f.txt and a 3 MB file with its checksum. */
async function writtenOnA(
  cluster: Awaited<ReturnType<typeof startMachines>>,
  session: string,
  env: NodeJS.ProcessEnv = {},
) {
  await cluster.client.request('POST', '/v1/agents', {
    name: 'res',
    provider: 'command',
    mode: 'resident',
    workspaceMb: 8,
  });
  const a = await cluster.addMachine('a', env);
  for (const cmd of WRITE_TWO_TURNS) {
    const done = await send(cluster.client, session, cmd);
    assert.equal(done.type, 'reply', JSON.stringify(done.data));
  }
  return a;
}

test('a resident workspace follows its session: A dies with its disk, B answers from the capture in the chain; a restart on B’s disk is not refused; a recycle captures before C takes it', async (t) => {
  const cluster = await startMachines(t);
  const { client, store, addMachine, destroy } = cluster;
  const a = await writtenOnA(cluster, 's1');
  // The capture follows the commit (and its reply).
  await eventually(
    'the second turn captured',
    async () =>
      (await store.getSessionView('s1', Date.now()))?.resident.capturedVersion === 2 ? true : undefined,
    30_000,
  );
  const chain = await store.getWorkspaceChain('s1');
  assert.deepEqual(
    chain.entries.map((e) => [e.version, e.kind]),
    [
      [1, 'snapshot'],
      [2, 'layer'],
    ],
    'the sandbox’s first capture is whole, the next one what changed',
  );
  assert.ok(chain.entries[1]!.size > 2_900_000, 'the 3 MB file is in the second capture');
  await destroy(a);

  const b = await addMachine('b');
  const checked = await send(client, 's1', CHECK);
  assert.equal(checked.type, 'reply', JSON.stringify(checked.data));
  assert.match(String(checked.data.text), /^one\nbig\.bin: OK/);
  const view = await store.getSessionView('s1', Date.now());
  assert.equal(view?.hold, null);
  assert.match(String(view?.resident.holderName), new RegExp(b.dataDir), 'B holds it now');

  // B's worker SIGKILLed and restarted on its disk: the files are there, nothing is fetched.
  // Its turn leaves a process that writes after the turn's capture.
  b.child.kill('SIGKILL');
  await exited(b.child);
  const bAgain = await addMachine('b-again', { BERTH_DATA: b.dataDir });
  const again = await send(client, 's1', `${CHECK}; (sleep 3; echo late > late.txt) &`);
  assert.equal(again.type, 'reply', JSON.stringify(again.data));
  assert.match(String(again.data.text), /^one\nbig\.bin: OK/);
  await eventually(
    'the late write on B’s disk',
    () =>
      stat(join(b.dataDir, 'workspaces', 's1', 'committed', 'late.txt')).then(
        () => true,
        () => undefined,
      ),
    30_000,
  );

  // A planned move: the recycle captures what was written since, then C answers from it.
  await client.request('POST', '/v1/sessions/s1/recycle');
  await eventually(
    'the recycle captured',
    async () =>
      (await store.getSessionView('s1', Date.now()))?.resident.capturedVersion === 5 ? true : undefined,
    30_000,
  );
  await destroy(bAgain);
  await addMachine('c');
  const late = await send(client, 's1', 'cat late.txt');
  assert.equal(late.type, 'reply', JSON.stringify(late.data));
  assert.equal(String(late.data.text), 'late\n');
});

test('a resident workspace written after its last capture, lost with its machine: the turn fails RESIDENT_WORKSPACE_LOST, the messages are held, reset-workspace goes on empty', async (t) => {
  const cluster = await startMachines(t);
  const { client, store, addMachine, destroy } = cluster;
  // A dies after the second turn's commit, before its capture: the 3 MB file is on A's disk only.
  const a = await writtenOnA(cluster, 'r1', failpointEnv('resident-before-capture@2'));
  await exited(a.child);
  const written = await store.listTurns('r1');
  assert.deepEqual(
    written.map((x) => [x.status, x.baseVersion]),
    [
      ['committed', 0],
      ['committed', 1],
    ],
    'each resident turn names the version it ran on',
  );
  const lastWrite = written.at(-1)!;
  await destroy(a);

  await addMachine('b');
  const checked = await post(client, 'r1', CHECK);
  const seen = await outcome(client, 'r1', checked.eventId, repliedTo(checked.message.id));
  assert.equal(seen.type, 'held', `no reply may be committed on B: ${JSON.stringify(seen)}`);
  assert.equal(seen.data.code, 'RESIDENT_WORKSPACE_LOST');
  assert.match(String(seen.data.error), new RegExp(a.dataDir));
  assert.match(
    String(seen.data.error),
    new RegExp(
      `${new Date(lastWrite.endedAt!).toISOString()} \\(workspace version 2; its chain's newest capture is of version 1\\)`,
    ),
  );

  const view = await client.request<View>('GET', '/v1/sessions/r1');
  assert.equal(view.status, 'held');
  assert.equal(view.hold?.code, 'RESIDENT_WORKSPACE_LOST');
  const listed = await client.request<{ sessions: View[] }>('GET', '/v1/sessions');
  assert.equal(listed.sessions.find((s) => s.id === 'r1')?.hold?.code, 'RESIDENT_WORKSPACE_LOST');
  const inbound = (await store.listMessages('r1', 0, 100)).filter((m) => m.direction === 'in');
  assert.deepEqual(
    inbound.slice(2).map((m) => [m.text, m.status]),
    [[CHECK, 'pending']],
    'the message is kept',
  );
  const turns = await store.listTurns('r1');
  assert.ok(
    turns.some((x) => String(x.errorCode) === 'RESIDENT_WORKSPACE_LOST' && x.status === 'aborted'),
    JSON.stringify(turns.map((x) => [x.status, x.errorCode])),
  );
  assert.equal(turns.filter((x) => x.status === 'committed').length, 2, 'nothing committed after A died');
  // Held, not retried: no new turn starts while nobody acts.
  await new Promise((r) => setTimeout(r, 4000));
  assert.equal((await store.listTurns('r1')).length, turns.length, 'a held session is not claimed again');

  // The operator accepts the loss: the session goes on, on an empty workspace.
  const reset = await cli(cluster, ['session', 'reset-workspace', 'r1', '--json']);
  assert.equal(reset.code, 0, reset.stderr);
  assert.equal((JSON.parse(reset.stdout) as View).hold, null);
  const replies = await eventually(
    'the held message is answered',
    async () => {
      const out = (await store.listMessages('r1', 0, 100)).filter((m) => m.direction === 'out');
      return out.length === 3 ? out : undefined;
    },
    120_000,
  );
  // Explicitly, and only now: the operator accepted that the files are gone.
  assert.match((replies[2]!.data as { stderr: string }).stderr, /f\.txt: No such file/);
  const audit = (await store.listAudit(0, 1000)).filter((x) => x.kind === 'workspace-reset');
  assert.equal(audit.length, 1, 'the accepted loss is recorded');
  assert.equal(audit[0]!.sessionId, 'r1');
});

/** The lines of a command run in the session's live sandbox, its terminal line the last. */
async function exec(client: Client, session: string, command: string) {
  const lines: ExecLine[] = [];
  for await (const line of client.exec(session, { command }, AbortSignal.timeout(60_000))) lines.push(line);
  return lines;
}

/**
 * The files of session s1's live sandbox through the API: a 1 MiB round trip the sandbox
 * and the agent's next turn see, the directory operations, paths leaving the workspace
 * (by their text or a symlink) refused, and a write over the quota leaving nothing.
 */
async function filesOfTheLiveSandbox(cluster: Awaited<ReturnType<typeof startMachines>>) {
  const { client } = cluster;
  const files = new Berth({ url: cluster.url, token: cluster.token }).sessions.sandboxFiles;
  const data = randomBytes(2 ** 20);
  const written = await files.write('s1', 'up/data.bin', Readable.from([data]), { mkdirs: true });
  assert.deepEqual([written.type, written.size], ['file', 2 ** 20]);
  assert.ok((await files.read('s1', '/workspace/up/data.bin')).equals(data));
  const sum = createHash('sha256').update(data).digest('hex');
  const seen = await exec(client, 's1', 'sha256sum up/data.bin | cut -c1-64; stat -c %u up/data.bin');
  assert.equal(seen.map((l) => (l.type === 'stdout' ? l.data : '')).join(''), `${sum}\n1000\n`);
  await files.makeDir('s1', 'd');
  await files.rename('s1', 'up/data.bin', 'd/moved.bin');
  await files.remove('s1', 'up');
  assert.deepEqual(
    (await files.list('s1', 'd')).entries.map((e) => [e.name, e.type, e.size]),
    [['moved.bin', 'file', 2 ** 20]],
  );
  const ls = await cli(cluster, ['files', 'ls', 's1', '/workspace/d']);
  assert.match(ls.stdout, /^-0644 +1048576 +\S+ \S+ +moved\.bin\n$/, ls.stderr);
  await files.write('s1', 'note.txt', 'from the API\n');
  const turn = await send(client, 's1', 'cat note.txt');
  assert.deepEqual([turn.type, turn.data.text], ['reply', 'from the API\n'], 'the next turn sees it');
  await exec(client, 's1', 'ln -s /etc etc-link');
  const refused = async (attempt: Promise<unknown>) =>
    attempt.then(
      () => 'done',
      (err: unknown) => (err as { code: string }).code,
    );
  assert.deepEqual(
    [
      await refused(files.read('s1', '../x')),
      await refused(files.read('s1', '/etc/passwd')),
      await refused(files.read('s1', 'etc-link/passwd')),
      await refused(files.write('s1', 'etc-link/planted', 'x')),
      await refused(files.stat('s1', 'gone.txt')),
      await refused(files.write('s1', 'huge.bin', Readable.from([randomBytes(6 * 2 ** 20)]))),
    ],
    [
      'PATH_OUTSIDE_WORKSPACE',
      'PATH_OUTSIDE_WORKSPACE',
      'PATH_OUTSIDE_WORKSPACE',
      'PATH_OUTSIDE_WORKSPACE',
      'FILE_NOT_FOUND',
      'WORKSPACE_QUOTA_EXCEEDED',
    ],
  );
  const after = await exec(client, 's1', 'ls -A; test -e /etc/planted && echo planted; sha256sum -c sum.txt');
  assert.equal(
    after.map((l) => (l.type === 'stdout' ? l.data : '')).join(''),
    'big.bin\nd\netc-link\nf.txt\nnote.txt\nsum.txt\nbig.bin: OK\n',
    'nothing planted, nothing half-written, nothing replaced',
  );
  await exec(client, 's1', 'rm -r d etc-link note.txt');
}

test('a resident session on the same data dir after its worker is SIGKILLed and restarted is not refused; exec reaches the worker holding its sandbox, and a killed one ends the stream SANDBOX_RESTARTED', async (t) => {
  const cluster = await startMachines(t);
  const { client, store, addMachine } = cluster;
  const a = await writtenOnA(cluster, 's1');
  // Between turns the resident sandbox is live: the API (a process of its own) reaches the
  // worker holding it, A, not the API process's own worker, which holds nothing.
  assert.equal((await store.listWorkers()).length, 2, "A's worker and the API process's");
  const lines = await exec(client, 's1', 'cat f.txt; echo oops >&2; exit 3');
  assert.deepEqual(lines, [
    { type: 'stdout', data: 'one\n' },
    { type: 'stderr', data: 'oops\n' },
    { type: 'exit', exitCode: 3 },
  ]);
  await filesOfTheLiveSandbox(cluster);
  // The CLI: the output as it comes, the command's exit code as its own.
  const viaCli = await cli(cluster, ['exec', 's1', '--', 'sh', '-c', 'echo out; exit 5']);
  assert.deepEqual([viaCli.code, viaCli.stdout], [5, 'out\n'], viaCli.stderr);
  // A client that goes away kills the command.
  const gone = new AbortController();
  const waiting = client.exec('s1', { command: 'echo up; exec sleep 3600' }, gone.signal);
  assert.deepEqual((await waiting.next()).value, { type: 'stdout', data: 'up\n' });
  gone.abort();
  await waiting.return(undefined).catch(() => undefined);
  await eventually('the command is killed', async () => {
    const [first] = await exec(client, 's1', 'pgrep -x sleep || echo none');
    return first?.type === 'stdout' && first.data === 'none\n' ? true : undefined;
  });
  // A long command; its worker is SIGKILLed while it runs.
  const stream = client.exec(
    's1',
    { command: 'echo started; sleep 60; echo never' },
    AbortSignal.timeout(60_000),
  );
  const first = await stream.next();
  assert.deepEqual(first.value, { type: 'stdout', data: 'started\n' });
  a.child.kill('SIGKILL');
  await exited(a.child);
  const rest: ExecLine[] = [];
  for await (const line of stream) rest.push(line);
  assert.deepEqual(
    rest.map((l) => [l.type, l.type === 'error' ? l.code : null, l.type === 'error' ? l.reason : null]),
    [['error', 'SANDBOX_RESTARTED', 'WorkerLost']],
  );
  await addMachine('a-again', { BERTH_DATA: a.dataDir });
  const checked = await send(client, 's1', CHECK);
  assert.equal(checked.type, 'reply', JSON.stringify(checked.data));
  assert.match(String(checked.data.text), /^one\nbig\.bin: OK/);
  const view = (await store.getSessionView('s1', Date.now())) as View | null;
  assert.equal(view?.hold, null);
  // Its new sandbox is on the new worker: the API reaches that one.
  assert.deepEqual(await exec(client, 's1', 'cat f.txt'), [
    { type: 'stdout', data: 'one\n' },
    { type: 'exit', exitCode: 0 },
  ]);
});

test('a held session resumed once its data dir is back: the message kept is answered on the files it was written for', async (t) => {
  const cluster = await startMachines(t);
  const { client, addMachine } = cluster;
  // A goes away with its disk intact (a reboot, a detached volume) after the second turn's
  // commit, before its capture; B is asked meanwhile.
  const a = await writtenOnA(cluster, 'h1', failpointEnv('resident-before-capture@2'));
  await exited(a.child);
  const b = await addMachine('b');
  // `berth send --wait` stops when the session is held: the code, the holder, the way out.
  const sent = await cli(cluster, ['send', 'h1', CHECK, '--wait']);
  assert.equal(sent.code, 2, `a 4xx code: ${sent.stderr}`);
  assert.match(sent.stderr, /Session h1 is held; message \d+ is kept/);
  assert.match(sent.stderr, new RegExp(a.dataDir));
  assert.match(sent.stderr, /berth session reset-workspace ID/);
  b.child.kill('SIGTERM');
  await exited(b.child);

  await addMachine('a-back', { BERTH_DATA: a.dataDir });
  const resumed = await cli(cluster, ['session', 'resume', 'h1']);
  assert.equal(resumed.code, 0, resumed.stderr);
  assert.match(resumed.stdout, /session h1: resumed, status (queued|starting|running)/);
  const answered = await eventually(
    'the kept message is answered',
    async () => {
      const out = (
        await client.request<{ messages: { direction: string; text: string }[] }>(
          'GET',
          '/v1/sessions/h1/messages',
        )
      ).messages.filter((m) => m.direction === 'out');
      return out.length === 3 ? out : undefined;
    },
    120_000,
  );
  assert.match(answered[2]!.text, /^one\nbig\.bin: OK/);
});
