/**
 * Detection: time from the start of a `docker kill` of a sandbox in the middle of a turn to
 * the turn being aborted in the store (the `retrying` event), p50/p99. The engine's event
 * stream is what tells the worker; the baseline is the kill call itself, which returns only
 * once the engine has stopped the container (so detection cannot beat it by much).
 */
import { type BenchOptions, benchHost, stats } from './harness.js';

export async function detection({ quick }: BenchOptions) {
  const runs = quick ? 5 : 30;
  const h = await benchHost({ BERTH_RETRY_BASE: '50ms' }, 1);
  const killCallMs: number[] = [];
  const detectMs: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const session = `det-${i}`;
      const posted = await h.client.request<{ eventId: number }>('POST', `/v1/sessions/${session}/messages`, {
        agent: 'b',
        text: 'if [ "$BERTH_ATTEMPT" = 1 ]; then sleep 60; fi',
      });
      let killedAt = 0;
      for await (const e of h.client.events(session, posted.eventId, AbortSignal.timeout(60_000))) {
        if (e.type === 'started' && killedAt === 0) {
          const view = await h.host.store.getSessionView(session, Date.now());
          await new Promise((r) => setTimeout(r, 200)); // let the runner take the turn
          killedAt = performance.now();
          await h.host.docker.getContainer(view!.sandbox!).kill();
          killCallMs.push(performance.now() - killedAt);
        }
        if (e.type === 'retrying') detectMs.push(performance.now() - killedAt);
        if (e.type === 'reply') break;
      }
    }
  } finally {
    await h.close();
  }
  return {
    bench: 'detection',
    dockerKillCallMs: stats(killCallMs),
    killStartToTurnAbortedMs: stats(detectMs),
  };
}
