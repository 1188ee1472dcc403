/** Shared pieces of the benchmarks: percentiles, a throw-away host, and a message follower. */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Dockerode from 'dockerode';
import { pino } from 'pino';
import { ApiClient, type Host, startHost } from '../src/cli/index.js';
import { loadConfig } from '../src/core/index.js';

export interface BenchOptions {
  /** Fewer iterations, for CI. */
  quick: boolean;
}

export function stats(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
  return { n: s.length, p50: round(at(0.5)), p99: round(at(0.99)), min: round(s[0]!), max: round(s.at(-1)!) };
}

export const round = (ms: number) => Math.round(ms * 10) / 10;

/** `call` once to warm up, then `n` times in a row: the stats of those n, in ms. */
export async function timeEach(n: number, call: () => Promise<unknown>) {
  await call();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await call();
    samples.push(performance.now() - t0);
  }
  return stats(samples);
}

/** A host in this process on a temp data dir, with a `command` agent `b`; close() removes everything. */
/** `slots` undefined: the default from the machine's CPUs and memory. */
export async function benchHost(env: Record<string, string>, slots?: number) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-bench-'));
  const config = loadConfig({ ...process.env, ...env, BERTH_DATA: dataDir }, { apiPort: 0, slots });
  const host: Host = await startHost(config, pino({ level: 'silent' }));
  const client = new ApiClient(host.url, host.adminToken);
  await client.request('POST', '/v1/agents', { name: 'b', provider: 'command' });
  return {
    host,
    client,
    config,
    async close() {
      await host.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Posts a message and returns ms from the POST to the turn's start and to its reply. */
export async function timedMessage(client: ApiClient, sessionId: string, text: string, agent = 'b') {
  const t0 = performance.now();
  const posted = await client.request<{ eventId: number }>('POST', `/v1/sessions/${sessionId}/messages`, {
    agent,
    text,
  });
  let startedMs = Number.NaN;
  for await (const e of client.events(sessionId, posted.eventId, AbortSignal.timeout(60_000))) {
    if (e.type === 'started') startedMs = performance.now() - t0;
    if (e.type === 'reply') return { startedMs, replyMs: performance.now() - t0, text: String(e.data.text) };
    if (e.type === 'failed') throw new Error(`bench message failed: ${JSON.stringify(e.data)}`);
  }
  throw new Error('event stream ended before the reply');
}

/** The baseline of the warm benchmarks: `docker exec <container> true` through the Engine API (create, start, wait). */
export async function dockerExecTrueMs(container: Dockerode.Container): Promise<number> {
  const t0 = performance.now();
  const exec = await container.exec({ Cmd: ['true'], AttachStdout: false, AttachStderr: false });
  const stream = await exec.start({ Detach: false });
  await new Promise((r) => stream.on('end', r).resume());
  return performance.now() - t0;
}
