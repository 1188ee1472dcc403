/**
 * The chaos checker on constructed runs: a clean run passes every invariant, and a run that
 * breaks one fails exactly that invariant, by name. Runs are built from real parts: a real
 * SQLite store written through the Store's own transitions (claim, start, progress, commit,
 * abort) the way a worker and a runner write it, real files and dirs in a temp data dir, a
 * real mount, real processes and real containers carrying the install's label.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { promisify } from 'node:util';
import { FileBlobStore } from '../src/blobs/index.js';
import {
  checkInvariants,
  expectedLog,
  type InvariantResult,
  type ProcessEnd,
  type RequestRecord,
  readStoreSnapshot,
  turnPlan,
} from '../src/chaos/index.js';
import {
  agentSpecSchema,
  type CommitInput,
  type ErrorCode,
  hostPaths,
  installIdOf,
  LABELS,
  loadConfig,
  type TurnOutput,
} from '../src/core/index.js';
import { resolveImage } from '../src/host/index.js';
import { connectDocker } from '../src/runtime/index.js';
import { openSqliteStore, type Store } from '../src/store/index.js';
import { packTree, workspaceLayout } from '../src/workspace/index.js';
import { CHAOS_INVARIANTS } from './helpers/chaos-report.js';

const run = promisify(execFile);
const LEASE_MS = 10_000;
const AGENT = 'chaos';
const WORKER = 'wrk_checker';
const SEED = 7;
const S = 'chk-1';
const docker = connectDocker(loadConfig(process.env).dockerSocket);

/** A chaos run's data dir, store and client records, built transition by transition. */
class ConstructedRun {
  readonly installId: string;
  readonly requests: RequestRecord[] = [];
  readonly processes: ProcessEnd[] = [
    { name: 'worker-1', alive: true, lastExit: null, stop: { code: 0, signal: null, forced: false } },
  ];
  /** The run's blob store, where the session's workspace chain is (file blobs, as a run on one machine has them). */
  readonly blobs: FileBlobStore;
  private now = Date.now();
  /** Turns of the session sent so far. */
  private sent = 0;
  /** The session's workspace version: its committed turns. */
  private version = 0;
  /** Messages its committed turns took: what log.txt holds. */
  private committedMessages = 0;
  /** Replies its client received so far. */
  private arrivals = 0;

  private constructor(
    readonly dataDir: string,
    readonly store: Store,
  ) {
    this.installId = installIdOf(dataDir);
    this.blobs = new FileBlobStore(join(dataDir, 'blobs'));
  }

  static async start(t: TestContext): Promise<ConstructedRun> {
    const dataDir = await mkdtemp(join(tmpdir(), 'berth-checker-'));
    t.after(() => rm(dataDir, { recursive: true, force: true }));
    const layout = workspaceLayout(dataDir);
    // What the run's workers always make.
    for (const dir of [layout.slotsDir, layout.sessionsDir, hostPaths(dataDir).runDir])
      await mkdir(dir, { recursive: true });
    const store = openSqliteStore({
      path: hostPaths(dataDir).storeFile,
      leaseMs: LEASE_MS,
      retry: { retryBaseMs: 1, retryMaxMs: 10, maxTries: 3 },
    });
    t.after(() => store.close());
    const now = Date.now();
    await store.createAgent(agentSpecSchema.parse({ name: AGENT, provider: 'script' }), now);
    await store.registerWorker({ id: WORKER, host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
    const run = new ConstructedRun(dataDir, store);
    await run.blobs.check();
    return run;
  }

  /** The run's clock: each transition a second after the one before. */
  tick(): number {
    this.now += 1000;
    return this.now;
  }

  /** Sends the session's next turn of the workload; its message id. */
  async send(): Promise<{ turn: number; messageId: number }> {
    const turn = ++this.sent;
    const text = JSON.stringify(turnPlan(0, turn, { session: S, seed: SEED }));
    const { message } = await this.store.enqueueMessage({
      sessionId: S,
      agent: AGENT,
      text,
      now: this.tick(),
    });
    return { turn, messageId: message.id };
  }

  /** A worker claims the session and starts its turn. */
  async startTurn() {
    const now = this.tick();
    await this.store.renewWorker(WORKER, now);
    const claim = await this.store.claimRunnableSession(WORKER, now);
    assert.ok(claim, 'a runnable session');
    const fence = { sessionId: claim.session.id, generation: claim.session.generation, workerId: WORKER };
    const started = await this.store.startTurn(fence, now);
    assert.ok(started.code === 'ok' && started.value, 'a turn started');
    return { fence, turnId: started.value.turn.id };
  }

  /**
   * What the next commit ran on and changed, as a worker commits it: its layer (log.txt as
   * the workload's next `messages` committed messages write it) uploaded to the chain's blob
   * store first.
   */
  async workspace(messages = 1): Promise<NonNullable<CommitInput['workspace']>> {
    const version = ++this.version;
    this.committedMessages += messages;
    const tree = join(this.dataDir, 'layer-trees', String(version));
    await mkdir(tree, { recursive: true });
    await writeFile(join(tree, 'log.txt'), expectedLog(this.committedMessages));
    const key = `layers/${S}-${version}`;
    const { size } = await this.blobs.put(key, packTree(tree), { maxBytes: 1 << 20 });
    return { baseVersion: version - 1, layer: { key, size } };
  }

  /**
   * The next `messages` turns of the workload (default 1), sent together and taken by one
   * turn that commits as berth commits it (each message answered by its own reply, as the
   * script provider does, unless told otherwise); the client took the first reply naming
   * each. Their message ids.
   */
  async commitTurn(
    o: {
      messages?: number;
      outputs?: (sent: { turn: number; messageId: number }[]) => TurnOutput[];
      promote?: boolean;
    } = {},
  ): Promise<number[]> {
    const sent = [];
    for (let i = 0; i < (o.messages ?? 1); i++) sent.push(await this.send());
    const { fence, turnId } = await this.startTurn();
    const outputs =
      o.outputs?.(sent) ?? sent.map((m) => ({ text: `${S}:${m.turn}`, inReplyTo: [m.messageId] }));
    const last = sent.at(-1)!.turn;
    const commit = {
      ...fence,
      turnId,
      outputs,
      state: { turns: last },
      workspace: await this.workspace(sent.length),
    };
    assert.equal(await this.store.commitTurn(commit, this.tick()), 'ok');
    if (o.promote !== false) await this.store.markLayerPromoted(S, turnId);
    assert.equal(await this.store.releaseSession(fence, this.tick()), 'ok');
    await this.writeLog(expectedLog(last));
    for (const m of sent) await this.receive(m.turn, m.messageId);
    return sent.map((m) => m.messageId);
  }

  /** The client's record of an ok request: it took the first stored reply naming the message, as the driver does. */
  async receive(turn: number, messageId: number): Promise<void> {
    const reply = (await this.store.listMessages(S, 0, 1000)).find(
      (m) => m.direction === 'out' && m.inReplyTo?.includes(messageId),
    );
    assert.ok(reply?.inReplyTo, `a reply names message ${messageId}`);
    const event = (await this.store.eventsAfter(S, 0, 1000)).find(
      (e) => e.type === 'reply' && e.data.messageId === reply.id,
    );
    this.record(turn, messageId, 'ok', {
      replyText: reply.text,
      reply: {
        id: reply.id,
        inReplyTo: reply.inReplyTo,
        scope: event?.data.scope === 'message' ? 'message' : 'turn',
        data: reply.data,
        arrival: ++this.arrivals,
      },
    });
  }

  /**
   * The next turn fails at step `index` of its plan the ways a runner reports it: the
   * progress event with the failed step (unless `reported` is false), then the abort with
   * `code` — the runner's own, a limit's, or the supervisor's for a sandbox that died
   * first. A retryable abort is retried and commits; a terminal one fails the message.
   */
  async failStep(index: number, code: ErrorCode, reported = true): Promise<void> {
    const { turn, messageId } = await this.send();
    const { fence, turnId } = await this.startTurn();
    const kind = Object.keys(turnPlan(0, turn, { session: S, seed: SEED }).steps[index]!)[0]!;
    const text = `step ${index} (${kind}) failed`;
    if (reported)
      assert.equal(
        await this.store.recordProgress(
          { ...fence, turnId, text, failedStep: { messageId, index, kind } },
          this.tick(),
        ),
        'ok',
      );
    assert.equal(await this.store.abortTurn({ ...fence, turnId, code, error: text }, this.tick()), 'ok');
    assert.equal(await this.store.releaseSession(fence, this.tick()), 'ok');
    if (code === 'SANDBOX_PIDS_LIMIT') {
      this.record(turn, messageId, 'fail', { failedCode: code });
      return;
    }
    const retry = await this.startTurn();
    const commit = {
      ...retry.fence,
      turnId: retry.turnId,
      outputs: [{ text: `${S}:${turn}`, inReplyTo: [messageId] }],
      state: { turns: turn },
      workspace: await this.workspace(),
    };
    assert.equal(await this.store.commitTurn(commit, this.tick()), 'ok');
    await this.store.markLayerPromoted(S, retry.turnId);
    assert.equal(await this.store.releaseSession(retry.fence, this.tick()), 'ok');
    await this.writeLog(expectedLog(turn));
    await this.receive(turn, messageId);
  }

  record(
    turn: number,
    messageId: number | null,
    outcome: RequestRecord['outcome'],
    got: Partial<Pick<RequestRecord, 'replyText' | 'reply' | 'failedCode'>> = {},
  ) {
    this.requests.push({
      session: S,
      turn,
      messageId,
      outcome,
      reason: outcome === 'ok' ? '' : 'constructed',
      retriesSeen: 0,
      eventsSeen: 0,
      lastEvent: null,
      sentAt: this.now,
      endedAt: this.now,
      replyText: null,
      reply: null,
      failedCode: null,
      ...got,
    });
  }

  async writeLog(content: string): Promise<void> {
    const committed = workspaceLayout(this.dataDir).committedPath(S);
    await mkdir(committed, { recursive: true });
    await writeFile(join(committed, 'log.txt'), content);
  }

  /** The checker, as runChaos calls it after every berth process exited. */
  async check(): Promise<InvariantResult[]> {
    const sessions = await readStoreSnapshot(this.dataDir, [S], LEASE_MS, '');
    const { dataDir, installId, requests, processes } = this;
    const results = await checkInvariants({
      dataDir,
      installId,
      docker,
      sessions,
      requests,
      processes,
      blobs: this.blobs,
    });
    assert.deepEqual(
      results.map((r) => r.name),
      [...CHAOS_INVARIANTS],
    );
    return results;
  }
}

/** A run of two clean turns: the base every case breaks one thing of. */
async function cleanRun(t: TestContext): Promise<ConstructedRun> {
  const r = await ConstructedRun.start(t);
  await r.commitTurn();
  await r.commitTurn();
  return r;
}

/** Asserts exactly these invariants failed, each with a detail matching its pattern. */
function assertFailed(results: InvariantResult[], expected: Record<string, RegExp>): void {
  const failed = results.filter((r) => !r.passed);
  assert.deepEqual(
    failed.map((r) => r.name),
    Object.keys(expected),
    JSON.stringify(failed, null, 2),
  );
  for (const r of failed)
    assert.ok(
      r.details.some((d) => expected[r.name]!.test(d)),
      `${r.name}: no detail matches ${expected[r.name]}: ${JSON.stringify(r.details)}`,
    );
}

test('a clean constructed run passes every invariant', async (t) => {
  const r = await cleanRun(t);
  assertFailed(await r.check(), {});
});

test('exactly-one-reply: a message done without a reply (lost) fails it', async (t) => {
  const r = await cleanRun(t);
  const { turn, messageId } = await r.send();
  const { fence, turnId } = await r.startTurn();
  assert.equal(
    await r.store.commitTurn(
      { ...fence, turnId, outputs: [], state: { turns: turn }, workspace: await r.workspace() },
      r.tick(),
    ),
    'ok',
  );
  await r.store.markLayerPromoted(S, turnId);
  await r.store.releaseSession(fence, r.tick());
  await r.writeLog(expectedLog(turn));
  r.record(turn, messageId, 'unknown');
  assertFailed(await r.check(), {
    'exactly-one-reply': new RegExp(`message ${messageId} \\(done, 1 tries\\) has no reply`),
  });
});

test('exactly-one-reply: a message still pending at shutdown fails it', async (t) => {
  const r = await cleanRun(t);
  const { turn, messageId } = await r.send();
  r.record(turn, messageId, 'unknown');
  assertFailed(await r.check(), {
    'exactly-one-reply': new RegExp(`message ${messageId} still pending at shutdown`),
  });
});

test('exactly-one-reply: a message with two committed replies (duplicate) fails it, and its ok disagrees with the store', async (t) => {
  const r = await cleanRun(t);
  const [id] = await r.commitTurn({ outputs: () => [{ text: `${S}:3` }, { text: `${S}:3` }] });
  assertFailed(await r.check(), {
    'exactly-one-reply': new RegExp(`message ${id} has 2 replies`),
    'outcomes-agree': new RegExp(`the client got its reply but 2 committed replies name message ${id}`),
  });
});

test('a clean run with two messages taken by one turn, each answered by its own reply, passes every invariant', async (t) => {
  const r = await cleanRun(t);
  await r.commitTurn({ messages: 2 });
  assertFailed(await r.check(), {});
});

test('reply-attribution: two messages taken by one turn, each reply naming both, fails it (each client took the first)', async (t) => {
  const r = await cleanRun(t);
  const [a, b] = await r.commitTurn({
    messages: 2,
    // Outputs that name no message answer the whole turn: both replies name both messages.
    outputs: (sent) => sent.map((m) => ({ text: `${S}:${m.turn}` })),
  });
  assertFailed(await r.check(), {
    'exactly-one-reply': new RegExp(`message ${a} has 2 replies`),
    'reply-attribution': new RegExp(
      `the reply the client took for message ${b} is "${S}:3", expected "${S}:4"`,
    ),
    'outcomes-agree': new RegExp(`2 committed replies name message ${b}`),
  });
  const attribution = (await r.check()).find((x) => x.name === 'reply-attribution')!;
  assert.ok(
    attribution.details.some((d) =>
      d.includes(`is "${S}:3" but names message ${b}, whose reply is "${S}:4"`),
    ),
    JSON.stringify(attribution.details),
  );
});

test('acknowledged-kept: an acknowledged message the store does not hold fails it', async (t) => {
  const r = await cleanRun(t);
  r.record(3, 999_999, 'unknown');
  assertFailed(await r.check(), {
    'acknowledged-kept': /message 999999 was acknowledged but is not stored/,
  });
});

test('acknowledged-kept: a reply the client received that the store holds otherwise fails it', async (t) => {
  const r = await cleanRun(t);
  r.requests.at(-1)!.replyText = 'what the client saw';
  assertFailed(await r.check(), {
    'reply-attribution': /the reply the client took for message \d+ is "what the client saw", expected/,
    'acknowledged-kept': /the reply the client received to message \d+ is not stored/,
  });
});

test('committed-workspace: a committed log.txt that differs from the committed writes fails it', async (t) => {
  const r = await cleanRun(t);
  // A killed third attempt's first write, promoted although the turn never committed.
  await r.writeLog(`${expectedLog(2)}3:a\n`);
  assertFailed(await r.check(), {
    'committed-workspace': /log\.txt is .*3:a.*expected .*\(2 messages committed\)/,
  });
});

test('committed-workspace: a dir where the committed log.txt should be fails it', async (t) => {
  const r = await cleanRun(t);
  const log = join(workspaceLayout(r.dataDir).committedPath(S), 'log.txt');
  await rm(log);
  await mkdir(log);
  assertFailed(await r.check(), { 'committed-workspace': /log\.txt is a dir, expected "/ });
});

// Turn 3's plan: assertFile (0), assertState (1), append (2), sleep (3), its background job (4), ...
test('no-partial-reads: an assertFile failure the runner reported and aborted fails it', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(0, 'STEP_FAILED');
  assertFailed(await r.check(), { 'no-partial-reads': /STEP_FAILED.*step 0 \(assertFile\)/ });
});

test('no-partial-reads: an assertState failure fails it', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(1, 'STEP_FAILED');
  assertFailed(await r.check(), { 'no-partial-reads': /step 1 \(assertState\)/ });
});

test('no-partial-reads: a failed assert whose sandbox died before its abort still fails it', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(0, 'SANDBOX_EXITED');
  assertFailed(await r.check(), { 'no-partial-reads': /aborted SANDBOX_EXITED/ });
});

test('no-partial-reads: a failed assert in a turn that also hit a sandbox limit still fails it', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(0, 'SANDBOX_PIDS_LIMIT');
  assertFailed(await r.check(), { 'no-partial-reads': /aborted SANDBOX_PIDS_LIMIT/ });
});

test("no-stray-process: a failed check for an earlier turn's background process fails it", async (t) => {
  const r = await ConstructedRun.start(t);
  // Turn 1 leaves a `tail -f` in the background; with SEED the second burst starts at turn 5.
  for (let turn = 1; turn <= 4; turn++) await r.commitTurn();
  await r.failStep(2, 'STEP_FAILED'); // turn 5: assertFile, assertState, the stray check
  assertFailed(await r.check(), { 'no-stray-process': /step 2 \(run\)/ });
});

test('no-failed-steps: another step that failed fails it', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(2, 'STEP_FAILED');
  assertFailed(await r.check(), { 'no-failed-steps': /\[step 2 \(append\) of message \d+\]/ });
});

test('no-failed-steps: a STEP_FAILED turn with no step reported is counted, not skipped', async (t) => {
  const r = await cleanRun(t);
  await r.failStep(0, 'STEP_FAILED', false);
  assertFailed(await r.check(), { 'no-failed-steps': /STEP_FAILED with no step reported/ });
});

test('no-failed-steps: a plan the runner could not read (no step index) is counted', async (t) => {
  const r = await cleanRun(t);
  const { turn, messageId } = await r.send();
  const { fence, turnId } = await r.startTurn();
  const failedStep = { messageId, index: null, kind: null };
  const error = 'script plan is not valid JSON';
  await r.store.recordProgress({ ...fence, turnId, text: error, failedStep }, r.tick());
  await r.store.abortTurn({ ...fence, turnId, code: 'STEP_FAILED', error }, r.tick());
  await r.store.releaseSession(fence, r.tick());
  r.record(turn, messageId, 'unknown');
  assertFailed(await r.check(), {
    'exactly-one-reply': new RegExp(`message ${messageId} still pending at shutdown`),
    'no-failed-steps': /\[step null \(null\) of message \d+\]/,
  });
});

test('turns-ended: a turn still running, leased, at shutdown fails it', async (t) => {
  const r = await cleanRun(t);
  const { turn, messageId } = await r.send();
  const { turnId } = await r.startTurn();
  r.record(turn, messageId, 'unknown');
  assertFailed(await r.check(), {
    'exactly-one-reply': /still processing at shutdown/,
    'turns-ended': new RegExp(`turn ${turnId} still running`),
  });
});

test('turns-ended: a committed layer never promoted fails it', async (t) => {
  const r = await cleanRun(t);
  await r.commitTurn({ promote: false });
  assertFailed(await r.check(), { 'turns-ended': /layer of turn turn_\w+ never promoted/ });
});

test('clean-shutdown: a process that died during the run, or ignored SIGTERM, fails it', async (t) => {
  const r = await cleanRun(t);
  r.processes.push(
    {
      name: 'worker-2',
      alive: false,
      lastExit: { code: null, signal: 'SIGSEGV', at: Date.now() },
      stop: { code: null, signal: null, forced: false },
    },
    { name: 'api', alive: true, lastExit: null, stop: { code: null, signal: 'SIGKILL', forced: true } },
  );
  assertFailed(await r.check(), { 'clean-shutdown': /worker-2 was not running when the workload ended/ });
  const details = (await r.check()).find((x) => x.name === 'clean-shutdown')!.details;
  assert.ok(details.some((d) => /api ignored SIGTERM/.test(d)));
});

test('no-orphan-slots, -run-dirs, -layers: what a sandbox or turn left on disk fails each', async (t) => {
  const r = await cleanRun(t);
  const layout = workspaceLayout(r.dataDir);
  const sandbox = `berth-${r.installId}-${S}-g9`;
  await mkdir(layout.slotPath(sandbox));
  await mkdir(hostPaths(r.dataDir).sandboxRunDir(sandbox));
  await mkdir(join(layout.layerPath(S, 'turn_left'), 'upper'), { recursive: true });
  assertFailed(await r.check(), {
    'no-orphan-slots': new RegExp(`^${sandbox}$`),
    'no-orphan-run-dirs': new RegExp(`^${sandbox}$`),
    'no-orphan-layers': /layers\/turn_left$/,
  });
});

test('no-orphan-run-dirs, -slots, -layers: a dir the workers always make, missing, fails it (the checker looks in the wrong place)', async (t) => {
  const r = await cleanRun(t);
  await rm(hostPaths(r.dataDir).runDir, { recursive: true });
  await rm(workspaceLayout(r.dataDir).slotsDir, { recursive: true });
  await rm(workspaceLayout(r.dataDir).sessionsDir, { recursive: true });
  assertFailed(await r.check(), {
    'committed-workspace': /missing log\.txt/,
    'no-orphan-slots': /cannot list .*slots: ENOENT/,
    'no-orphan-run-dirs': /cannot list .*run: ENOENT/,
    'no-orphan-layers': /cannot list .*workspaces: ENOENT/,
  });
});

test('no-orphan-mounts: a mount left under the data dir fails it', async (t) => {
  const r = await cleanRun(t);
  const point = join(r.dataDir, 'left-mounted');
  await mkdir(point);
  await run('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'berth-checker', point]);
  try {
    assertFailed(await r.check(), { 'no-orphan-mounts': new RegExp(`${point} \\(tmpfs\\)`) });
  } finally {
    await run('umount', [point]);
  }
});

test("no-orphan-processes: a host process running the workload's background job fails it", async (t) => {
  const r = await cleanRun(t);
  const cwd = await mkdtemp(join(tmpdir(), 'berth-checker-tail-'));
  t.after(() => rm(cwd, { recursive: true, force: true }));
  await writeFile(join(cwd, 'log.txt'), '');
  const tail = await started(spawn('tail', ['-f', 'log.txt'], { cwd, stdio: 'ignore' }));
  t.after(() => tail.kill('SIGKILL'));
  assertFailed(await r.check(), { 'no-orphan-processes': new RegExp(`^${tail.pid}: tail -f log\\.txt$`) });
});

test("no-orphan-containers, -processes: this install's container fails both; another install's does not count", async (t) => {
  const r = await cleanRun(t);
  const image = await resolveImage(docker, loadConfig({ ...process.env, BERTH_DATA: r.dataDir }));
  const tailing = async (install: string) => {
    const c = await docker.createContainer({
      Image: image,
      Entrypoint: ['sh', '-c'],
      Cmd: ['cd /tmp && touch log.txt && exec tail -f log.txt'],
      User: 'root',
      HostConfig: { NetworkMode: 'none' },
      Labels: { [LABELS.install]: install, [LABELS.worker]: WORKER },
    });
    t.after(() => c.remove({ force: true }));
    await c.start();
    return c;
  };
  const [ours] = await Promise.all([tailing(r.installId), tailing(`${r.installId}x`)]);
  await waitFor(async () =>
    ((await ours.top()).Processes as string[][]).some((p) => p.join(' ').includes('tail -f log.txt')),
  );
  assertFailed(await r.check(), {
    'no-orphan-containers': /\(running, worker wrk_checker\)/,
    'no-orphan-processes': /^\d+: tail -f log\.txt$/,
  });
  const processes = (await r.check()).find((x) => x.name === 'no-orphan-processes')!;
  assert.equal(processes.details.length, 1, "only this install's container's process");
});

async function started(child: ChildProcess): Promise<ChildProcess> {
  await new Promise<void>((resolve, reject) => child.once('spawn', resolve).once('error', reject));
  return child;
}

async function waitFor(condition: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await condition()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('condition not met in 10 s');
}
