/**
 * The client side of the sse-streams bench, in a worker thread of its own: it opens the
 * streams (90 % session streams over SESSIONS sessions, 10 % tenant streams), writes
 * events through its own store connection (another process's writes), and probes the API
 * with a user's POST and GET /v1/status meanwhile. It tells its parent when the measured
 * window starts (`{measuring: true}`) and posts its figures at the end (`{done}`).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { ApiClient, type StreamedEvent } from '../src/client/index.js';
import { loadConfig } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { stats } from './harness.js';

const SESSIONS = 50;
export const WRITE_EVERY_MS = 10;
const PROBE_EVERY_MS = 50;

export interface StreamClientsJob {
  url: string;
  token: string;
  /** The API's SQLite file, written through a connection of this thread's own. */
  dbPath: string;
  name: string;
  tenant: string;
  agent: string;
  streams: number;
  seconds: number;
  /** Probe with a POST and /v1/status (the baseline's app serves the streams only). */
  probe: boolean;
}

export interface StreamClientsResult {
  connected: number;
  written: number;
  figures: {
    deliveries: number;
    deliveryDelayMs: ReturnType<typeof stats> | null;
    postAcceptedMs: ReturnType<typeof stats> | null;
    statusMs: ReturnType<typeof stats> | null;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function run(job: StreamClientsJob): Promise<StreamClientsResult> {
  const config = loadConfig({});
  const writer = openSqliteStore({ path: job.dbPath, leaseMs: config.leaseMs, retry: config });
  const { tenant, agent } = job;
  const client = new ApiClient(job.url, job.token);
  const session = (i: number) => `${job.name}-s${i}`;
  for (let i = 0; i < SESSIONS; i++)
    await writer.enqueueMessage({ sessionId: session(i), agent, text: 'first', now: Date.now(), tenant });
  const after = await writer.lastEventId();

  const delays: number[] = [];
  const cut = new AbortController();
  let measuring = false;
  const opened = Array.from({ length: job.streams }, (_, i) =>
    i % 10 === 9
      ? client.stream('/v1/events', after, cut.signal)
      : client.events(session(i % SESSIONS), after, cut.signal),
  );
  let connected = 0;
  const pumps = opened.map(async (s) => {
    try {
      let first = true;
      for await (const e of s as AsyncGenerator<StreamedEvent>) {
        if (first) {
          first = false;
          connected++;
        }
        if (e.id !== null && measuring) delays.push(Date.now() - Number(e.data.at));
      }
    } catch {
      // cut at the end
    }
  });
  // A stream counts as open at its first event: one per session.
  for (let i = 0; i < SESSIONS; i++)
    await writer.enqueueMessage({ sessionId: session(i), text: 'open', now: Date.now(), tenant });
  const openDeadline = Date.now() + 120_000;
  while (connected < job.streams && Date.now() < openDeadline) await sleep(50);

  measuring = true;
  parentPort!.postMessage({ measuring: true });
  const t0 = Date.now();
  const postMs: number[] = [];
  const statusMs: number[] = [];
  const probes = (async () => {
    if (!job.probe) return;
    for (let k = 0; Date.now() - t0 < job.seconds * 1000; k++) {
      const p0 = performance.now();
      await client.request('POST', `/v1/sessions/${job.name}-probe${k}/messages`, { text: 'probe', agent });
      const p1 = performance.now();
      await client.request('GET', '/v1/status');
      statusMs.push(performance.now() - p1);
      postMs.push(p1 - p0);
      await sleep(PROBE_EVERY_MS);
    }
  })();
  let written = 0;
  while (Date.now() - t0 < job.seconds * 1000) {
    await writer.enqueueMessage({
      sessionId: session(written % SESSIONS),
      text: `m${written}`,
      now: Date.now(),
      tenant,
    });
    written++;
    await sleep(WRITE_EVERY_MS);
  }
  await probes;
  await sleep(1_500);
  measuring = false;
  cut.abort();
  await Promise.all(pumps);
  await writer.close();
  return {
    connected,
    written,
    figures: {
      deliveries: delays.length,
      deliveryDelayMs: delays.length > 0 ? stats(delays) : null,
      postAcceptedMs: postMs.length > 0 ? stats(postMs) : null,
      statusMs: statusMs.length > 0 ? stats(statusMs) : null,
    },
  };
}

if (parentPort) parentPort.postMessage({ done: await run(workerData as StreamClientsJob) });
