/**
 * Detection: how long after a sandbox dies mid-turn its turn is aborted in the store.
 *  - baseline: the `docker kill` call itself (it returns once the engine has the container
 *    stopped, so detection cannot beat it by much when measured from the call's start);
 *  - from the start of the kill call to the turn row's end (`ended_at`, written by the abort);
 *  - from the engine's `die` event (its own timestamp) to the turn row's end: the part berth
 *    controls (event stream → worker → supervisor → store);
 *  - from the start of the kill call to the retry's reply at the client: what a user of a warm
 *    session waits for a killed sandbox, under the default retry policy.
 *  All times are this host's wall clock (the engine runs here too).
 */
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { jsonLines } from '../src/core/index.js';
import { type BenchOptions, benchHost, stats } from './harness.js';

export async function detection({ quick }: BenchOptions) {
  const runs = quick ? 5 : 30;
  const h = await benchHost({}, 1);
  const killCallMs: number[] = [];
  const killToAbortedMs: number[] = [];
  const dieToAbortedMs: number[] = [];
  const killToReplyMs: number[] = [];
  /** When this round's kill was issued; NaN once its reply is counted, or when it killed nothing. */
  let killedAt = Number.NaN;
  let endedBeforeKill = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const session = `det-${i}`;
      const posted = await h.client.request<{ eventId: number }>('POST', `/v1/sessions/${session}/messages`, {
        agent: 'b',
        text: 'if [ "$BERTH_ATTEMPT" = 1 ]; then sleep 60; fi',
      });
      for await (const e of h.client.events(session, posted.eventId, AbortSignal.timeout(60_000))) {
        if (e.type === 'started' && killCallMs.length === i) {
          const view = await h.host.store.getSessionView(session, Date.now());
          await new Promise((r) => setTimeout(r, 200)); // let the runner take the turn
          const container = h.host.docker.getContainer(view!.sandbox!);
          const stopWatching = new AbortController();
          const dieEvent = nextDieAt(h.host.docker, view!.sandbox!, stopWatching.signal);
          killedAt = Date.now();
          const t0 = performance.now();
          const killed = await container.kill().then(
            () => true,
            // 409: the sandbox ended before the kill (a loaded machine missed a heartbeat):
            // no detection to measure in this round; it is counted, not timed.
            (err: { statusCode?: number }) => {
              if (err.statusCode !== 409) throw err;
              return false;
            },
          );
          if (!killed) {
            killedAt = Number.NaN;
            stopWatching.abort();
            endedBeforeKill++;
            killCallMs.push(Number.NaN);
            continue;
          }
          killCallMs.push(performance.now() - t0);
          const died = await dieEvent;
          const [aborted] = (await waitForAbortedTurn(h.host.store, session)).filter((t) => t.attempt === 1);
          killToAbortedMs.push(aborted!.endedAt! - killedAt);
          if (Number.isFinite(died)) dieToAbortedMs.push(aborted!.endedAt! - died);
        }
        if (e.type === 'reply') {
          if (Number.isFinite(killedAt)) killToReplyMs.push(Date.now() - killedAt);
          killedAt = Number.NaN;
          break;
        }
      }
    }
  } finally {
    await h.close();
  }
  return {
    bench: 'detection',
    baselineDockerKillCallMs: stats(killCallMs.filter(Number.isFinite)),
    sandboxesEndedBeforeTheKill: endedBeforeKill,
    killStartToTurnAbortedMs: stats(killToAbortedMs),
    engineDieToTurnAbortedMs: dieToAbortedMs.length > 0 ? stats(dieToAbortedMs) : null,
    killStartToReplyMs: stats(killToReplyMs),
  };
}

/** The engine's own timestamp of the container's next `die` event, epoch ms. */
async function nextDieAt(docker: Dockerode, name: string, signal: AbortSignal): Promise<number> {
  const stream = (await docker.getEvents({
    filters: { type: ['container'], event: ['die'], container: [name] },
  })) as unknown as Readable;
  signal.addEventListener('abort', () => stream.destroy(), { once: true });
  try {
    for await (const event of jsonLines(stream))
      return Math.round((event as { timeNano: number }).timeNano / 1e6);
    return Number.NaN;
  } catch (err) {
    if (signal.aborted) return Number.NaN;
    throw err;
  } finally {
    stream.destroy();
  }
}

async function waitForAbortedTurn(
  store: Awaited<ReturnType<typeof benchHost>>['host']['store'],
  session: string,
) {
  for (;;) {
    const turns = (await store.listTurns(session)).filter(
      (t) => t.status === 'aborted' && t.endedAt !== null,
    );
    if (turns.length > 0) return turns;
    await new Promise((r) => setTimeout(r, 2));
  }
}
