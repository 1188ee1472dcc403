/**
 * Checkpoints for jobs, against real sandboxes and real worker processes: a `command` job
 * that checkpoints after each of its steps and skips, on a retry, what BERTH_CHECKPOINT
 * says it did. Its sandbox `docker kill`ed after step 3: the retry resumes from checkpoint
 * 3 (its files, its deletions), and the committed workspace holds each step exactly once;
 * the checkpoints are collected after the commit (on SQLite and on PostgreSQL). A chain
 * with an object lost is not restored at all: the retry redoes everything on the committed
 * tree. A worker SIGKILLed after uploading
 * checkpoint 3 and before recording it: the retry falls back to checkpoint 2; killed after
 * recording it and before answering the job: the retry resumes from checkpoint 3. The same
 * cuts in a model-call checkpoint of berth's own anthropic loop (and one after it is recorded,
 * before the call is forwarded): the heir resumes the loop, each tool's write lands once and
 * no model call is paid twice. The timelines show each kill (its code), the checkpoint the
 * retry resumed from and, for the model loop, the calls each try paid and its tool calls.
 * A background writer of a job stands still while each checkpoint is captured (the
 * sandbox frozen), and the checkpoint holds its file whole; a worker SIGKILLed while the
 * sandbox is frozen leaves it frozen, and the next worker's sweep thaws and removes it.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { timelineLine } from '../src/cli/index.js';
import { agentSpecSchema, buildTurnTimeline, type FailpointName } from '../src/core/index.js';
import { cgroupFreezerOf } from '../src/runtime/docker/container-freezer.js';
import { connectDocker } from '../src/runtime/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { openStore, type Store } from '../src/store/index.js';
import { applyLayerArchive } from '../src/workspace/index.js';
import { failpointEnv, failpointWatchEnv } from './helpers/failpoint-preload.js';
import { startFakeAnthropic } from './helpers/fake-models.js';
import { freshDatabase } from './helpers/postgres.js';
import { eventually, exited, spawnBerth } from './helpers/processes.js';
import { waitPromoted } from './helpers/test-host.js';

const LEASE_MS = 2000;

/**
 * Six steps, each appended to steps.txt and checkpointed; a retry skips the steps its
 * checkpoint's label names as done. The first try removes old.txt (committed) and makes
 * then removes tmp.txt: deletions both of a committed file and of one of its own. With
 * HOLD_AFTER set, the first try waits after that step's checkpoint, to be killed there.
 */
const JOB = `
set -e
done=0
if [ -n "$BERTH_CHECKPOINT" ]; then
  echo "resumed:$BERTH_CHECKPOINT" >> resumes.txt
  label="\${BERTH_CHECKPOINT#*:}"
  done="\${label#step-}"
fi
for i in 1 2 3 4 5 6; do
  [ "$i" -le "$done" ] && continue
  [ "$i" = 1 ] && rm old.txt && echo scratch > tmp.txt
  [ "$i" = 2 ] && rm tmp.txt
  echo "step-$i" >> steps.txt
  berth-checkpoint "step-$i"
  [ "$BERTH_ATTEMPT" = 1 ] && [ "$i" = "\${HOLD_AFTER:-0}" ] && sleep 600
  sleep 0.2
done
ls
`;

async function startInstall(t: TestContext, kind: 'sqlite' | 'postgres' = 'sqlite') {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-checkpoints-'));
  const storeUrl = kind === 'postgres' ? await freshDatabase() : '';
  const env = { ...process.env, BERTH_DATA: dataDir, BERTH_LEASE: `${LEASE_MS}ms`, BERTH_STORE: storeUrl };
  const store: Store = await openStore({
    store: storeUrl,
    sqlitePath: join(dataDir, 'berth.db'),
    leaseMs: LEASE_MS,
    retry: { retryBaseMs: 200, retryMaxMs: 1000, maxTries: 5 },
  });
  await store.createAgent(agentSpecSchema.parse({ name: 'job', provider: 'command' }), store.clock.now());
  const children: ChildProcess[] = [];
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await store.close();
    if (process.env.BERTH_KEEP_TEST_DATA) console.log(`kept ${dataDir}`);
    else await rm(dataDir, { recursive: true, force: true });
  });
  const startWorker = async (name: string, extraEnv: NodeJS.ProcessEnv = {}) => {
    const child = spawnBerth(['worker', '--slots', '1'], { ...env, ...extraEnv }, dataDir, `${name}.log`);
    children.push(child);
    await eventually(
      `worker ${name} registered`,
      async () => {
        if (child.exitCode !== null || child.signalCode !== null)
          assert.fail(`worker ${name} exited: ${await readFile(join(dataDir, `${name}.log`), 'utf8')}`);
        return (await store.listWorkers()).some((w) => w.pid === child.pid) || undefined;
      },
      60_000,
    );
    return child;
  };
  const send = (sessionId: string, text: string) =>
    store.enqueueMessage({ sessionId, agent: 'job', text, now: store.clock.now() });
  /** The session's replies once it has `count`, and the last commit promoted into the committed dir read below. */
  const replies = async (sessionId: string, count: number) => {
    const out = await eventually(
      `${count} replies in ${sessionId}`,
      async () => {
        const out = (await store.listMessages(sessionId, 0, 100)).filter((m) => m.direction === 'out');
        return out.length >= count ? out : undefined;
      },
      120_000,
    );
    await waitPromoted({ store }, sessionId);
    return out;
  };
  const checkpointsOf = (sessionId: string, messageId: number, count: number) =>
    eventually(
      `${count} checkpoints in ${sessionId}`,
      async () => {
        const rows = await store.listCheckpoints(sessionId, messageId);
        return rows.length >= count ? rows : undefined;
      },
      60_000,
    );
  const committed = (sessionId: string, path: string) =>
    readFile(join(dataDir, 'workspaces', sessionId, 'committed', path), 'utf8').catch(() => null);
  const checkpointObjects = async () =>
    (await readdir(join(dataDir, 'blobs', 'checkpoints')).catch(() => [] as string[])).filter(
      (f) => !f.startsWith('.'),
    );
  return { dataDir, store, startWorker, send, replies, checkpointsOf, committed, checkpointObjects };
}

/** The committed tree's old.txt, which the job's first step deletes. */
async function seed(install: Awaited<ReturnType<typeof startInstall>>, sessionId: string): Promise<void> {
  await install.send(sessionId, 'echo old > old.txt');
  await install.replies(sessionId, 1);
}

for (const kind of ['sqlite', 'postgres'] as const)
  test(`${kind}: a job killed after step 3 resumes from its checkpoint: steps once each, deletions kept, checkpoints collected`, {
    timeout: 300_000,
  }, async (t) => {
    const install = await startInstall(t, kind);
    const { store } = install;
    await install.startWorker('w1');
    await seed(install, 'k');
    const { message } = await install.send('k', `HOLD_AFTER=3; ${JOB}`);
    const rows = await install.checkpointsOf('k', message.id, 3);
    assert.deepEqual(
      rows.map((r) => [r.seq, r.baseSeq, r.label]),
      [
        [1, 0, 'step-1'],
        [2, 1, 'step-2'],
        [3, 2, 'step-3'],
      ],
    );
    assert.equal(
      (await store.getSessionView('k', store.clock.now()))?.workspaceVersion,
      1,
      'no checkpoint is a commit',
    );
    assert.ok((await install.checkpointObjects()).length >= 3, 'their objects are in the blob store');
    const sandbox = (await store.getSessionView('k', store.clock.now()))!.sandbox!;
    await connectDocker('/var/run/docker.sock').getContainer(sandbox).kill();

    const [, reply] = await install.replies('k', 2);
    const turns = await store.listTurns('k');
    assert.deepEqual(
      turns.slice(1).map((x) => x.status),
      ['aborted', 'committed'],
    );
    assert.equal(
      await install.committed('k', 'resumes.txt'),
      'resumed:3:step-3\n',
      'the retry saw BERTH_CHECKPOINT',
    );
    assert.equal(
      await install.committed('k', 'steps.txt'),
      'step-1\nstep-2\nstep-3\nstep-4\nstep-5\nstep-6\n',
      'each step exactly once',
    );
    assert.equal(
      await install.committed('k', 'old.txt'),
      null,
      'a committed file deleted before a checkpoint stays deleted',
    );
    assert.equal(
      await install.committed('k', 'tmp.txt'),
      null,
      "a file of the turn's own deleted before a checkpoint stays deleted",
    );
    assert.deepEqual(
      reply!.text.trim().split('\n'),
      ['resumes.txt', 'steps.txt'],
      'the retry saw the restored tree',
    );
    assert.deepEqual(await store.listCheckpoints('k', message.id), [], 'the commit collected the rows');

    // The turn's timeline, after the commit: the killed try with its code, the resume from checkpoint 3.
    const record = (await store.getTurnRecord('k', turns.at(-1)!.id))!;
    const timeline = buildTurnTimeline(record, await store.turnActivity('k', record.attempts));
    t.diagnostic(timeline.entries.map(timelineLine).join('\n'));
    assert.deepEqual(
      timeline.tries.map((x) => [x.status, x.code, x.resumedFrom]),
      [
        ['aborted', turns[1]!.errorCode, null],
        ['committed', null, 3],
      ],
    );
    assert.ok(turns[1]!.errorCode, 'the kill has a code');
    assert.deepEqual(
      timeline.entries
        .filter((e) => e.kind !== 'progress')
        .map((e) => `${e.attempt} ${e.kind}${e.label ? ` ${e.label}` : ''}${e.code ? ` ${e.code}` : ''}`),
      [
        '1 try-started',
        '1 checkpoint step-1',
        '1 checkpoint step-2',
        '1 checkpoint step-3',
        `1 try-ended ${turns[1]!.errorCode}`,
        '2 try-started',
        '2 resumed step-3',
        '2 checkpoint step-4',
        '2 checkpoint step-5',
        '2 checkpoint step-6',
        '2 reply',
        '2 try-ended',
      ],
    );
    assert.equal(timeline.running, false);
    await eventually('checkpoint objects collected', async () =>
      (await install.checkpointObjects()).length === 0 ? true : undefined,
    );
  });

test('a checkpoint chain that cannot be restored (an object lost) is never half-used: the retry starts from the committed tree', {
  timeout: 300_000,
}, async (t) => {
  const install = await startInstall(t);
  const { store } = install;
  await install.startWorker('w1');
  await seed(install, 'l');
  const { message } = await install.send('l', `HOLD_AFTER=3; ${JOB}`);
  const rows = await install.checkpointsOf('l', message.id, 3);
  await rm(join(install.dataDir, 'blobs', rows[1]!.key));
  const sandbox = (await store.getSessionView('l', store.clock.now()))!.sandbox!;
  await connectDocker('/var/run/docker.sock').getContainer(sandbox).kill();
  await install.replies('l', 2);
  assert.equal(await install.committed('l', 'resumes.txt'), null, 'the retry saw no BERTH_CHECKPOINT');
  assert.equal(
    await install.committed('l', 'steps.txt'),
    'step-1\nstep-2\nstep-3\nstep-4\nstep-5\nstep-6\n',
    'each step exactly once: all redone on the committed tree, nothing of checkpoints 1 and 3 kept',
  );
  assert.equal(await install.committed('l', 'old.txt'), null);
  assert.deepEqual(await store.listCheckpoints('l', message.id), []);
});

/** Where the worker dies in its third checkpoint, and the checkpoint the retry must resume from. */
const CUTS = [
  {
    point: 'checkpoint-after-upload',
    resumes: 2,
    why: 'uploaded, never recorded: the retry falls back to checkpoint 2',
  },
  {
    point: 'checkpoint-after-record',
    resumes: 3,
    why: 'recorded, never answered: the retry resumes from checkpoint 3',
  },
] as const;

for (const cut of CUTS)
  test(`a worker SIGKILLed at ${cut.point} of checkpoint 3: ${cut.why}`, { timeout: 300_000 }, async (t) => {
    const install = await startInstall(t);
    const { store } = install;
    const seeder = await install.startWorker('seed');
    await seed(install, 'f');
    seeder.kill('SIGTERM');
    await exited(seeder);
    const doomed = await install.startWorker('doomed', failpointEnv(`${cut.point}@3`));
    const { message } = await install.send('f', JOB);
    await exited(doomed);
    assert.equal(doomed.signalCode, 'SIGKILL', 'the worker died at the failpoint');
    const labels = ['step-1', 'step-2', 'step-3'].slice(0, cut.resumes);
    assert.deepEqual(
      (await store.listCheckpoints('f', message.id)).map((r) => r.label),
      labels,
    );
    await install.startWorker('heir');
    await install.replies('f', 2);
    assert.equal(await install.committed('f', 'resumes.txt'), `resumed:${cut.resumes}:step-${cut.resumes}\n`);
    assert.equal(
      await install.committed('f', 'steps.txt'),
      'step-1\nstep-2\nstep-3\nstep-4\nstep-5\nstep-6\n',
      'each step exactly once',
    );
    assert.equal(await install.committed('f', 'old.txt'), null);
    assert.deepEqual(await store.listCheckpoints('f', message.id), [], 'the commit collected the rows');
  });

/**
 * Where a worker dies in the model-call checkpoint of its loop's 4th call, and the checkpoints
 * recorded then: the heir's loop resumes at call 3 (journalled, replayed) or 4 (never sent).
 */
const MODEL_CUTS: { point: FailpointName; recorded: number }[] = [
  { point: 'checkpoint-after-upload', recorded: 3 },
  { point: 'checkpoint-after-record', recorded: 4 },
  { point: 'model-before-forward', recorded: 4 },
];

test('a worker SIGKILLed at each step of a model-call checkpoint: the heir resumes the loop, each write once, no call paid twice', {
  timeout: 300_000,
}, async (t) => {
  const STEPS = 6;
  const install = await startInstall(t);
  const { store, dataDir } = install;
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: '' }).set('anthropic', 'sk-cuts');
  await store.createAgent(
    agentSpecSchema.parse({ name: 'm', provider: 'anthropic', model: 'model-x' }),
    store.clock.now(),
  );
  for (const [i, cut] of MODEL_CUTS.entries()) {
    const fake = await startFakeAnthropic([
      ...Array.from({ length: STEPS }, (_, k) => ({
        tool: { name: 'bash', input: { command: `echo step-${k} >> steps.txt` } },
      })),
      { text: 'done' },
    ]);
    t.after(() => fake.close());
    const env = { ANTHROPIC_BASE_URL: fake.url };
    const sessionId = `m${i}`;
    const doomed = await install.startWorker(`doomed-${i}`, { ...env, ...failpointEnv(`${cut.point}@4`) });
    const { message } = await store.enqueueMessage({
      sessionId,
      agent: 'm',
      text: 'go',
      now: store.clock.now(),
    });
    await exited(doomed);
    assert.equal(doomed.signalCode, 'SIGKILL', `${cut.point}: the worker died at the failpoint`);
    assert.equal(
      (await store.listCheckpoints(sessionId, message.id)).length,
      cut.recorded,
      `${cut.point}: the checkpoints recorded`,
    );
    const heir = await install.startWorker(`heir-${i}`, env);
    await install.replies(sessionId, 1);
    heir.kill('SIGTERM');
    await exited(heir);
    assert.equal(
      await install.committed(sessionId, 'steps.txt'),
      Array.from({ length: STEPS }, (_, k) => `step-${k}\n`).join(''),
      `${cut.point}: each step exactly once`,
    );
    // Each of the STEPS + 1 calls once upstream: the heir's first call, a repeat of a
    // journalled one or never forwarded, is not paid again.
    assert.equal(fake.scripted().length, STEPS + 1, `${cut.point}: upstream calls`);
    const [, retry] = await store.listTurns(sessionId);
    assert.equal(
      (await store.sumModelUsage({ turnId: retry!.id })).calls,
      STEPS + 1 - 3,
      'the heir paid calls 4 on',
    );
    // The timeline: the dead worker's try with its code and its 3 paid calls, the heir's
    // resumed from the last checkpoint recorded, with the rest.
    const record = (await store.getTurnRecord(sessionId, retry!.id))!;
    const timeline = buildTurnTimeline(record, await store.turnActivity(sessionId, record.attempts));
    t.diagnostic(`${cut.point}\n${timeline.entries.map(timelineLine).join('\n')}`);
    assert.deepEqual(
      timeline.tries.map((x) => [x.status, x.resumedFrom, Boolean(x.code)]),
      [
        ['aborted', null, true],
        ['committed', cut.recorded, false],
      ],
    );
    const calls = (attempt: number) =>
      timeline.entries.filter((e) => e.kind === 'model-call' && e.attempt === attempt).length;
    assert.deepEqual([calls(1), calls(2)], [3, STEPS + 1 - 3], `${cut.point}: model calls per try`);
    assert.equal(timeline.entries.find((e) => e.kind === 'resumed')?.modelCallsBefore, 3);
    assert.ok(timeline.entries.some((e) => e.kind === 'tool-call' && e.tool === 'bash' && e.endedAt));
  }
});

/**
 * A job whose background writer appends numbered lines to log.txt (then the number to
 * counter) every 10 ms while the job checkpoints twice; a retry (BERTH_CHECKPOINT set) just ends.
 */
const WRITER_JOB = `
[ -n "$BERTH_CHECKPOINT" ] && exit 0
( i=0; while true; do i=$((i+1)); echo "line $i" >> log.txt; echo $i > counter; sleep 0.01; done ) &
sleep 0.5
berth-checkpoint one
sleep 0.3
berth-checkpoint two
sleep 600
`;

/** FROZEN, THAWED, FREEZING (v1) or frozen 1/0 (v2) of a container's freezer cgroup. */
async function freezerState(pid: number): Promise<string> {
  const freezer = cgroupFreezerOf(await readFile(`/proc/${pid}/cgroup`, 'utf8'));
  if (!freezer) return 'no freezer';
  if (freezer.kind === 'cgroup-v1') return (await readFile(freezer.state, 'utf8')).trim();
  return /^frozen 1$/m.test(await readFile(freezer.events, 'utf8')) ? 'FROZEN' : 'THAWED';
}

test('a background writer stands still while a checkpoint is captured; a worker killed with the sandbox frozen leaves nothing frozen', {
  timeout: 300_000,
}, async (t) => {
  const install = await startInstall(t);
  const { store, dataDir } = install;
  const watched = join(dataDir, 'watched.jsonl');
  const doomed = await install.startWorker('doomed', {
    ...failpointWatchEnv('checkpoint-frozen', 'counter', watched),
    ...failpointEnv('checkpoint-frozen@2'),
  });
  const { message } = await install.send('w', WRITER_JOB);
  await exited(doomed);
  assert.equal(doomed.signalCode, 'SIGKILL', 'the worker died in its second capture');
  const readings = (await readFile(watched, 'utf8'))
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { before: string; after: string });
  assert.equal(readings.length, 2);
  for (const r of readings)
    assert.equal(r.after, r.before, 'the writer made no progress while its sandbox was frozen');

  const [first] = await store.listCheckpoints('w', message.id);
  assert.equal(first?.label, 'one');
  const unpacked = await mkdtemp(join(tmpdir(), 'berth-checkpoint-object-'));
  t.after(() => rm(unpacked, { recursive: true, force: true }));
  await applyLayerArchive(createReadStream(join(dataDir, 'blobs', first.key)), unpacked);
  const lines = (await readFile(join(unpacked, 'log.txt'), 'utf8')).split('\n');
  assert.equal(lines.pop(), '', 'log.txt ends with a whole line');
  assert.deepEqual(
    lines,
    lines.map((_, i) => `line ${i + 1}`),
    'log.txt as the writer left it: every line whole, none missing',
  );
  const counted = Number(await readFile(join(unpacked, 'counter'), 'utf8'));
  assert.ok([lines.length - 1, lines.length].includes(counted), 'counter and log.txt of one instant');

  const docker = connectDocker('/var/run/docker.sock');
  const sandbox = docker.getContainer((await store.getSessionView('w', store.clock.now()))!.sandbox!);
  assert.equal(
    await freezerState((await sandbox.inspect()).State.Pid),
    'FROZEN',
    'left frozen by its dead worker',
  );
  await install.startWorker('heir');
  await eventually('the frozen sandbox removed by the sweep', async () =>
    (await sandbox.inspect().catch(() => null)) === null ? true : undefined,
  );
  await install.replies('w', 1);
});
