/**
 * Cold turn start, measured against a baseline taken in the same run:
 *  - baseline: `docker run --rm --network none <image> node -e 1` through the Engine API
 *    (create, start, wait, remove);
 *  - berth: message accepted → turn started (the runner holds the turn) and → reply, with
 *    BERTH_IDLE_TIMEOUT=0 so every turn gets a fresh sandbox;
 *  - the memory of an idle, bound sandbox (runner booted, waiting for work).
 * Prints one JSON object.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { resolveImage } from '../src/cli/host.js';
import { ApiClient, startHost } from '../src/cli/index.js';
import { loadConfig } from '../src/core/index.js';
import { connectDocker } from '../src/runtime/index.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 10);

function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { n: s.length, p50: round(at(0.5)), p90: round(at(0.9)), min: round(s[0]!), max: round(s.at(-1)!) };
}
const round = (ms: number) => Math.round(ms * 10) / 10;

async function main() {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-bench-'));
  const config = loadConfig(
    { ...process.env, BERTH_DATA: dataDir, BERTH_IDLE_TIMEOUT: '0' },
    { apiPort: 0, slots: 1 },
  );
  const docker = connectDocker(config.dockerSocket);
  const image = await resolveImage(docker, config);

  const baseline: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const c = await docker.createContainer({
      Image: image,
      Cmd: ['node', '-e', '1'],
      HostConfig: { NetworkMode: 'none' },
    });
    await c.start();
    await c.wait();
    await c.remove();
    baseline.push(performance.now() - t0);
  }

  const host = await startHost(config, pino({ level: 'silent' }));
  const client = new ApiClient(host.url);
  await client.request('POST', '/v1/agents', { name: 'b', provider: 'command' });
  const toStarted: number[] = [];
  const toReply: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const posted = await client.request<{ eventId: number }>('POST', '/v1/sessions/bench/messages', {
      agent: 'b',
      text: 'true',
    });
    for await (const e of client.events('bench', posted.eventId)) {
      if (e.type === 'started') toStarted.push(performance.now() - t0);
      if (e.type === 'reply') {
        toReply.push(performance.now() - t0);
        break;
      }
    }
    // Let the sandbox of this turn go before the next cold start.
    while ((await host.store.getSessionView('bench', Date.now()))?.leaseOwner)
      await new Promise((r) => setTimeout(r, 20));
  }

  // An idle, bound sandbox: a session that keeps its sandbox between turns.
  await host.close();
  const idleConfig = loadConfig(
    { ...process.env, BERTH_DATA: dataDir, BERTH_IDLE_TIMEOUT: '60s' },
    { apiPort: 0, slots: 1 },
  );
  const idleHost = await startHost(idleConfig, pino({ level: 'silent' }));
  const idleClient = new ApiClient(idleHost.url);
  const posted = await idleClient.request<{ eventId: number }>('POST', '/v1/sessions/idle/messages', {
    agent: 'b',
    text: 'true',
  });
  for await (const e of idleClient.events('idle', posted.eventId)) if (e.type === 'reply') break;
  await new Promise((r) => setTimeout(r, 2000));
  const view = await idleHost.store.getSessionView('idle', Date.now());
  const st = (await docker.getContainer(view!.sandbox!).stats({ stream: false })) as {
    memory_stats: { usage: number; stats?: Record<string, number> };
  };
  const inactiveFile =
    st.memory_stats.stats?.inactive_file ?? st.memory_stats.stats?.total_inactive_file ?? 0;
  await idleHost.close();
  await rm(dataDir, { recursive: true, force: true });

  const b = stats(baseline);
  const started = stats(toStarted);
  process.stdout.write(
    `${JSON.stringify(
      {
        bench: 'cold-start',
        image,
        runs: RUNS,
        baselineDockerRunMs: b,
        coldMessageToTurnStartedMs: started,
        coldMessageToReplyMs: stats(toReply),
        ratioTurnStartedToBaselineP50: Math.round((started.p50 / b.p50) * 100) / 100,
        idleSandboxMemoryMiB: Math.round(((st.memory_stats.usage - inactiveFile) / 2 ** 20) * 10) / 10,
      },
      null,
      2,
    )}\n`,
  );
}

await main();
