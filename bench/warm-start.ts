/**
 * Turn start on a warm sandbox, against a baseline taken in the same run:
 *  - baseline: `docker exec <container> true` through the Engine API, in a container of the
 *    same image that is already up (the cheapest way the engine offers to run anything);
 *  - berth: a message to a NEW session → the runner holds the turn, measured as the client
 *    seeing the turn's first progress event (the runner's first step; an upper bound: it
 *    adds one gateway call, one store write and the SSE hop). The session is bound to a
 *    warm sandbox from the pool each time (BERTH_IDLE_TIMEOUT=0 releases it after its turn;
 *    the pool is refilled before the next message, so every sample is a pool hit).
 *  Also: the store's `started` event (turn row written) and the reply.
 */
import { resolveImage } from '../src/host/index.js';
import { type BenchOptions, benchHost, dockerExecTrueMs, round, stats } from './harness.js';

export async function warmStart({ quick }: BenchOptions) {
  const runs = quick ? 20 : 200;
  const h = await benchHost({ BERTH_IDLE_TIMEOUT: '0', BERTH_WARM_POOL: '2' }, 2);
  await h.client.request('POST', '/v1/agents', { name: 'script', provider: 'script' });
  const plan = JSON.stringify({ steps: [{ progress: 'held' }], reply: 'ok' });
  const started: number[] = [];
  const held: number[] = [];
  const reply: number[] = [];
  const execMs: number[] = [];
  let misses = 0;
  let cleanup = async (): Promise<unknown> => undefined;
  try {
    const ready = async () => {
      while (h.host.worker.warmPoolStats.ready < 1) await new Promise((r) => setTimeout(r, 5));
    };
    await ready();
    const container = await h.host.docker.createContainer({
      Image: await resolveImage(h.host.docker, h.config),
      Cmd: ['node', '-e', 'setInterval(() => {}, 1e9)'],
      HostConfig: { NetworkMode: 'none', AutoRemove: true },
    });
    await container.start();
    cleanup = () => container.kill().catch(() => undefined);
    for (let i = 0; i < runs; i++) {
      execMs.push(await dockerExecTrueMs(container));

      await ready();
      const missesBefore = h.host.worker.warmPoolStats.misses;
      const session = `warm-${i}`;
      const t0 = performance.now();
      const posted = await h.client.request<{ eventId: number }>('POST', `/v1/sessions/${session}/messages`, {
        agent: 'script',
        text: plan,
      });
      for await (const e of h.client.events(session, posted.eventId, AbortSignal.timeout(60_000))) {
        if (e.type === 'started') started.push(performance.now() - t0);
        if (e.type === 'progress') held.push(performance.now() - t0);
        if (e.type === 'reply') {
          reply.push(performance.now() - t0);
          break;
        }
        if (e.type === 'failed') throw new Error(`bench message failed: ${JSON.stringify(e.data)}`);
      }
      misses += h.host.worker.warmPoolStats.misses - missesBefore;
    }
  } finally {
    await cleanup();
    await h.close();
  }
  const b = stats(execMs);
  const hold = stats(held);
  return {
    bench: 'warm-start',
    baselineDockerExecTrueMs: b,
    newSessionToTurnStartedMs: stats(started),
    newSessionToRunnerHoldsTurnMs: hold,
    newSessionToReplyMs: stats(reply),
    poolMisses: misses,
    ratioRunnerHoldsToDockerExecP50: round(hold.p50 / b.p50),
  };
}
