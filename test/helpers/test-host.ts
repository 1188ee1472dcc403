/**
 * An in-process berth host on a temp data dir and a free port, against the real Docker
 * engine, for integration tests. Logs go to a file in the data dir (shown on failure).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { destination, pino } from 'pino';
import { ApiClient, type Host, startHost } from '../../src/cli/index.js';
import { loadConfig, type SessionEvent } from '../../src/core/index.js';

export interface TestHost {
  host: Host;
  client: ApiClient;
  dataDir: string;
  /** Posts a message and follows the session's events until `until` matches one (or the timeout). */
  sendAndCollect(
    sessionId: string,
    body: { text: string; agent?: string },
    until: (e: { type: string; data: Record<string, unknown> }) => boolean,
    timeoutMs?: number,
  ): Promise<{ type: string; data: Record<string, unknown> }[]>;
}

export async function startTestHost(
  t: TestContext,
  env: Record<string, string> = {},
  /** beforeRemove: run between the host's close and the data dir's removal (e.g. an unmount). */
  options: { dataDir?: string; beforeRemove?: () => Promise<void> } = {},
): Promise<TestHost> {
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), 'berth-test-')));
  const config = loadConfig({ BERTH_LOG_LEVEL: 'info', ...env, BERTH_DATA: dataDir }, { apiPort: 0 });
  const log = pino({ level: config.logLevel }, destination({ dest: join(dataDir, 'host.log'), sync: true }));
  const host = await startHost(config, log);
  const client = new ApiClient(host.url, host.adminToken);
  t.after(async () => {
    await host.close();
    await options.beforeRemove?.();
    await rm(dataDir, { recursive: true, force: true });
  });
  return {
    host,
    client,
    dataDir,
    async sendAndCollect(sessionId, body, until, timeoutMs = 60_000) {
      const posted = await client.request<{ eventId: number }>(
        'POST',
        `/v1/sessions/${sessionId}/messages`,
        body,
      );
      const seen: { type: string; data: Record<string, unknown> }[] = [];
      const abort = AbortSignal.timeout(timeoutMs);
      try {
        for await (const e of client.events(sessionId, posted.eventId, abort)) {
          seen.push({ type: e.type, data: e.data });
          if (until(e)) return seen;
        }
      } catch (err) {
        if ((err as Error).name !== 'TimeoutError' && (err as Error).name !== 'AbortError') throw err;
      }
      throw new Error(`timed out after ${timeoutMs} ms; events: ${JSON.stringify(seen)}`);
    },
  };
}

export type { SessionEvent };

/** Waits until the session's last commit is promoted into its committed layer (it follows the reply); throws after 5 s. */
export async function waitPromoted(
  host: {
    store: { getSessionView(id: string, now: number): Promise<{ pendingLayer: string | null } | null> };
  },
  sessionId: string,
): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const owed = (await host.store.getSessionView(sessionId, Date.now()))?.pendingLayer;
    if (!owed) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`session ${sessionId}: its last commit was not promoted within 5 s`);
}
