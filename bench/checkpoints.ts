/**
 * A job's checkpoint pause, from the worker's side of POST /v1/checkpoint to durable: the
 * attempt layer scanned through a real overlay, what changed packed and put in a `file`
 * blob store (fsynced), and the fenced record in a SQLite store on disk (WAL). Two cases:
 * 1 MiB (16 files of 64 KiB, incompressible) changed since the previous checkpoint, in an
 * attempt layer of 100 files already checkpointed (growing by those 16 each round); and
 * nothing changed, over the 100 files alone and over the grown attempt (the walk of the
 * upper dir is what a checkpoint costs when nothing changed). One take in 16 is a full
 * checkpoint (the chain's bound), as in a real turn. Baseline from the
 * same run: a bare 1 MiB put in the same blob store, the floor of a durable 1 MiB
 * checkpoint. Not measured: the gateway's Unix-socket hop (well under a millisecond) and,
 * inside the sandbox, starting berth-checkpoint (a node process: tens of ms).
 *
 * Each take freezes a real runc container (a `sleep`, standing for the sandbox) for its scan
 * and pack, as a turn's checkpoint does: `frozen` reports the freeze itself and the whole
 * pause (freeze asked → thawed) with 1 MiB changed and with nothing changed.
 *
 * Then the model-call checkpoint: streamed Anthropic calls through the gateway's model proxy
 * (over its socket, to a fake provider), whose checkpoint hook takes the same checkpoint of
 * the same attempt before the call is forwarded (nothing changed: no record). Three kinds of
 * call, alternated so they see the same load: a plain proxied call (no checkpoint, the
 * baseline), one after 1 MiB changed, one with nothing changed. `pause` is the hook's time
 * (request held → forwarded); `overhead` the call's time over the baseline's. The attempt
 * is the one above, grown on (740 files at the first call, 1,380 at the last): the walk of
 * its upper dir is what a call with nothing changed waits for.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileBlobStore } from '../src/blobs/index.js';
import { agentSpecSchema, hostPaths } from '../src/core/index.js';
import { baseImageRecipe, baseImageTag } from '../src/image/index.js';
import { connectDocker, DockerRuntime, whileFrozen } from '../src/runtime/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { Workspaces } from '../src/workspace/index.js';
import { startModelGateway } from '../test/helpers/model-gateway.js';
import { type BenchOptions, round, stats } from './harness.js';
import { proxiedAnthropic } from './model-proxy.js';

const SLOT = 'bench-checkpoints';
const DOCKER_SOCKET = '/var/run/docker.sock';

export async function checkpoints({ quick }: BenchOptions) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-bench-checkpoints-'));
  const blobs = new FileBlobStore(join(dataDir, 'blobs'));
  const workspaces = new Workspaces(dataDir, process.getuid?.() ?? 0, blobs);
  const store = openSqliteStore({
    path: join(dataDir, 'berth.db'),
    leaseMs: 60_000,
    retry: { retryBaseMs: 1000, retryMaxMs: 1000, maxTries: 3 },
  });
  const docker = connectDocker(DOCKER_SOCKET);
  const runtime = new DockerRuntime(docker, DOCKER_SOCKET);
  const sandbox = { id: '', name: `berth-bench-checkpoints-${process.pid}` };
  try {
    await workspaces.prepare();
    const image = baseImageTag(await baseImageRecipe(hostPaths(dataDir).imageCacheDir));
    await (
      await docker.createContainer({ Image: image, name: sandbox.name, Cmd: ['sleep', 'infinity'] })
    ).start();
    const now = Date.now();
    await store.createAgent(agentSpecSchema.parse({ name: 'b', provider: 'command' }), now);
    await store.registerWorker({ id: 'w', host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
    const { message } = await store.enqueueMessage({ sessionId: 's', agent: 'b', text: 'job', now });
    const claim = (await store.claimRunnableSession('w', now))!;
    const fence = { sessionId: 's', generation: claim.session.generation, workerId: 'w' };
    const started = await store.startTurn(fence, now);
    const turn = started.code === 'ok' ? started.value!.turn : null;
    if (!turn) throw new Error('bench: no turn started');
    await workspaces.mountAttempt('s', turn.id, SLOT);
    const merged = workspaces.slotPath(SLOT);
    await mkdir(join(merged, 'base'));
    for (let i = 0; i < 100; i++) await writeFile(join(merged, 'base', `f${i}`), randomBytes(10 * 1024));
    let index = await workspaces.scanCheckpoint('s', turn.id, SLOT);
    let seq = 0;
    /** Where the next takes' freeze and pause go (null: not reported). */
    let frozen: { freezeMs: number[]; pauseMs: number[] } | null = null;
    /** One checkpoint; at a model call (`skipUnchanged`) nothing is recorded when nothing changed. */
    const take = async (skipUnchanged = false): Promise<number> => {
      const t0 = performance.now();
      const capture = await whileFrozen(runtime, sandbox, () =>
        workspaces.captureCheckpoint('s', turn.id, SLOT, index),
      );
      frozen?.freezeMs.push(capture.freezeMs ?? Number.NaN);
      frozen?.pauseMs.push(capture.pauseMs ?? Number.NaN);
      const uploaded = {
        index: capture.value.index,
        object: await workspaces.uploadCheckpoint(capture.value),
      };
      if (skipUnchanged && !uploaded.object) return performance.now() - t0;
      const recorded = await store.recordCheckpoint(
        {
          ...fence,
          turnId: turn.id,
          messageId: message.id,
          baseSeq: seq,
          count: seq + 1,
          label: `c${seq + 1}`,
          key: uploaded.object?.key ?? '',
          size: uploaded.object?.size ?? 0,
        },
        Date.now(),
      );
      const ms = performance.now() - t0;
      if (recorded.code !== 'ok') throw new Error(`bench: checkpoint refused: ${recorded.code}`);
      index = uploaded.index;
      seq = recorded.value.seq;
      return ms;
    };
    await take(); // the base files: every later round is a delta over them
    const rounds = quick ? 10 : 40;
    const unchangedBase: number[] = [];
    for (let round = 0; round < rounds; round++) unchangedBase.push(await take());
    const changed: number[] = [];
    const unchanged: number[] = [];
    const floor: number[] = [];
    const frozenChanged = { freezeMs: [] as number[], pauseMs: [] as number[] };
    const frozenUnchanged = { freezeMs: [] as number[], pauseMs: [] as number[] };
    for (let round = 0; round < rounds; round++) {
      await mkdir(join(merged, `r${round}`));
      for (let i = 0; i < 16; i++)
        await writeFile(join(merged, `r${round}`, `f${i}`), randomBytes(64 * 1024));
      frozen = frozenChanged;
      changed.push(await take());
      frozen = frozenUnchanged;
      unchanged.push(await take());
      frozen = null;
      const body = randomBytes(1024 * 1024);
      const t0 = performance.now();
      await blobs.put(`bench/${round}`, [body], { maxBytes: 2 * 1024 * 1024 });
      floor.push(performance.now() - t0);
    }
    const changeFiles = async (round: number) => {
      await mkdir(join(merged, `m${round}`));
      for (let i = 0; i < 16; i++)
        await writeFile(join(merged, `m${round}`, `f${i}`), randomBytes(64 * 1024));
    };
    return {
      bench: 'checkpoints',
      blobs: 'file',
      store: 'sqlite',
      baseFiles: 100,
      changed1MiB: stats(changed),
      // Over the 100 base files alone, then over an attempt that grows to 100 + 16 × rounds files.
      nothingChangedBase: stats(unchangedBase),
      nothingChanged: stats(unchanged),
      baseline: { put1MiB: stats(floor) },
      // The sandbox (a runc container) frozen for the scan and pack: freezing it, and how long it stood still.
      frozen: {
        changed1MiB: { freezeMs: stats(frozenChanged.freezeMs), pauseMs: stats(frozenChanged.pauseMs) },
        nothingChanged: {
          freezeMs: stats(frozenUnchanged.freezeMs),
          pauseMs: stats(frozenUnchanged.pauseMs),
        },
      },
      modelCall: await modelCallPause(rounds, () => take(true), changeFiles),
    };
  } finally {
    await runtime.kill(sandbox, { hard: true }).catch(() => undefined);
    await workspaces.unmountSlot(SLOT).catch(() => undefined);
    await store.close();
    await workspaces.release().catch(() => undefined);
    await rm(dataDir, { recursive: true, force: true });
  }
}

/** The model-call checkpoint's pause and the call's overhead over a plain proxied call. */
async function modelCallPause(
  rounds: number,
  take: () => Promise<number>,
  changeFiles: (round: number) => Promise<void>,
) {
  let pauses: number[] | null = null;
  const g = await startModelGateway({ provider: 'anthropic', model: 'm' }, [], async () => {
    if (pauses) pauses.push(await take());
  });
  try {
    const client = proxiedAnthropic(g);
    let sent = 0;
    const call = async (with_: number[] | null) => {
      pauses = with_;
      g.fake.script.push({ tool: { name: 'bash', input: { command: 'ls' } } });
      // Each request differs: a repeated one would be answered from the journal.
      const messages = [{ role: 'user' as const, content: `step ${sent++}` }];
      const t0 = performance.now();
      await client.messages.stream({ model: 'm', max_tokens: 100, messages }).finalMessage();
      return performance.now() - t0;
    };
    for (let i = 0; i < 5; i++) await call(null); // warm the path
    const plain: number[] = [];
    const changed: number[] = [];
    const unchanged: number[] = [];
    const pauseChanged: number[] = [];
    const pauseUnchanged: number[] = [];
    for (let round = 0; round < rounds; round++) {
      plain.push(await call(null));
      await changeFiles(round);
      changed.push(await call(pauseChanged));
      unchanged.push(await call(pauseUnchanged));
    }
    const base = stats(plain);
    const withChange = stats(changed);
    const withNone = stats(unchanged);
    return {
      calls: rounds * 3,
      plainCallMs: base,
      changed1MiB: {
        pauseMs: stats(pauseChanged),
        callMs: withChange,
        overheadP50Ms: round(withChange.p50 - base.p50),
        overheadP99Ms: round(withChange.p99 - base.p99),
      },
      nothingChanged: {
        pauseMs: stats(pauseUnchanged),
        callMs: withNone,
        overheadP50Ms: round(withNone.p50 - base.p50),
        overheadP99Ms: round(withNone.p99 - base.p99),
      },
    };
  } finally {
    await g.close();
  }
}
