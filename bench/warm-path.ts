/**
 * The warm path, against a baseline taken in the same run:
 *  - baseline: `docker exec <sandbox> true` through the Engine API (exec create, start, wait);
 *  - warm turn: message accepted → turn started and → reply, for a session whose sandbox is
 *    bound and idle (each turn still mounts a fresh overlay layer and seals/promotes it);
 *  - sustained turns/s with one busy session per slot sending `true` back to back.
 */
import type { ApiClient } from '../src/cli/index.js';
import { type BenchOptions, benchHost, dockerExecTrueMs, round, stats, timedMessage } from './harness.js';

export async function warmPath({ quick }: BenchOptions) {
  const turns = quick ? 30 : 200;
  // One busy session per slot; more sessions than cores keeps both cores busy while turns wait on I/O.
  const slots = 8;
  const h = await benchHost({ BERTH_IDLE_TIMEOUT: '10m' }, slots);
  try {
    await timedMessage(h.client, 'warm', 'true'); // boots the sandbox
    const sandbox = (await h.host.store.getSessionView('warm', Date.now()))!.sandbox!;
    const container = h.host.docker.getContainer(sandbox);
    const execMs: number[] = [];
    const started: number[] = [];
    const reply: number[] = [];
    for (let i = 0; i < turns; i++) {
      execMs.push(await dockerExecTrueMs(container));
      const t = await timedMessage(h.client, 'warm', 'true');
      started.push(t.startedMs);
      reply.push(t.replyMs);
    }

    const durationMs = quick ? 5_000 : 20_000;
    const sessions = Array.from({ length: slots }, (_, i) => `tput-${i}`);
    for (const s of sessions) await timedMessage(h.client, s, 'true'); // bind each
    const deadline = performance.now() + durationMs;
    const counts = await Promise.all(sessions.map((s) => backToBack(h.client, s, deadline)));
    const total = counts.reduce((a, b) => a + b, 0);
    const e = stats(execMs);
    const r = stats(reply);
    return {
      bench: 'warm-path',
      baselineDockerExecTrueMs: e,
      warmMessageToTurnStartedMs: stats(started),
      warmMessageToReplyMs: r,
      ratioWarmReplyToDockerExecP50: round(r.p50 / e.p50),
      sustained: {
        sessions: slots,
        seconds: durationMs / 1000,
        turns: total,
        turnsPerSecond: round(total / (durationMs / 1000)),
      },
    };
  } finally {
    await h.close();
  }
}

async function backToBack(client: ApiClient, sessionId: string, deadline: number): Promise<number> {
  let n = 0;
  while (performance.now() < deadline) {
    await timedMessage(client, sessionId, 'true');
    n++;
  }
  return n;
}
