/**
 * A burst: N new sessions posted at once, against a baseline taken in the same run:
 *  - baseline: the time the warm pool needs to bring N sandboxes up from empty (a host with
 *    no slots busy and BERTH_WARM_POOL=N: from its start to N ready), the engine-bound floor
 *    of starting N sessions' sandboxes;
 *  - berth: from the first POST to the last session's `started` event, every session's
 *    trivial turn running on the host's default slots and pool.
 * Queue positions are checked throughout: every snapshot of the queue taken meanwhile
 * (GET /v1/queue, every 50 ms) numbers its sessions 1..k, and what each session's event
 * stream says of its own position only ever moves forward (it never grows: nobody posted
 * later overtakes it).
 */
import { type BenchOptions, benchHost, round, stats } from './harness.js';

export async function burst({ quick }: BenchOptions) {
  const n = quick ? 12 : 100;
  const refillMs = await poolRefillMs(n);
  const h = await benchHost({});
  const startedMs: number[] = [];
  let positionMovedBack = 0;
  const queue = { snapshots: 0, misnumbered: 0, longest: 0 };
  let lastStartedMs = 0;
  try {
    while (h.host.worker.warmPoolStats.ready < 1) await new Promise((r) => setTimeout(r, 10));
    const t0 = performance.now();
    let posting = true;
    const watching = (async () => {
      while (posting) {
        const { queue: entries } = await h.client.request<{ queue: { position: number }[] }>(
          'GET',
          '/v1/queue',
        );
        queue.snapshots++;
        queue.longest = Math.max(queue.longest, entries.length);
        if (entries.some((e, i) => e.position !== i + 1)) queue.misnumbered++;
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    await Promise.all(
      Array.from({ length: n }, async (_, i) => {
        const session = `burst-${i}`;
        const posted = await h.client.request<{ eventId: number; session: { queuePosition: number | null } }>(
          'POST',
          `/v1/sessions/${session}/messages`,
          { agent: 'b', text: 'true' },
        );
        let position = posted.session.queuePosition ?? Number.POSITIVE_INFINITY;
        for await (const e of h.client.events(session, posted.eventId, AbortSignal.timeout(600_000))) {
          if (e.type === 'queued' && typeof e.data.position === 'number') {
            if (e.data.position > position) positionMovedBack++;
            position = e.data.position;
          }
          if (e.type === 'started') {
            const at = performance.now() - t0;
            startedMs.push(at);
            lastStartedMs = Math.max(lastStartedMs, at);
          }
          if (e.type === 'reply') break;
          if (e.type === 'failed') throw new Error(`burst message failed: ${JSON.stringify(e.data)}`);
        }
      }),
    ).finally(() => {
      posting = false;
    });
    await watching;
  } finally {
    await h.close();
  }
  return {
    bench: 'burst',
    sessions: n,
    slots: h.config.slots,
    baselinePoolRefillMs: round(refillMs),
    allStartedMs: round(lastStartedMs),
    sessionStartedMs: stats(startedMs),
    ratioAllStartedToRefill: round(lastStartedMs / refillMs),
    queuePositions: { ...queue, movedBack: positionMovedBack },
  };
}

/**
 * How long a host's pool takes to bring `n` warm sandboxes up (no session claimed meanwhile):
 * timed from the host's start on, the sandboxes the pool had ready by then counted at the
 * same pace as the rest.
 */
async function poolRefillMs(n: number): Promise<number> {
  const h = await benchHost({ BERTH_WARM_POOL: String(n), BERTH_WARM_POOL_MIN: String(n) }, n);
  const t0 = performance.now();
  const readyAtStart = h.host.worker.warmPoolStats.ready;
  try {
    while (h.host.worker.warmPoolStats.ready < n) await new Promise((r) => setTimeout(r, 20));
    return ((performance.now() - t0) * n) / Math.max(1, n - readyAtStart);
  } finally {
    await h.close();
  }
}
