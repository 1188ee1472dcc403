/**
 * An install for a channel's end-to-end test: a data dir with the channel's secrets in the
 * host secret store, `berth up` processes started on demand (each with its own log, and
 * failpoints armed to SIGKILL it there), the CLI, and the store opened beside them. Every
 * process is stopped, the fake platform closed and the data dir wiped after the test.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { type FailpointName, hostPaths } from '../../src/core/index.js';
import { SecretStore } from '../../src/secrets/index.js';
import { openStore, type Store } from '../../src/store/index.js';
import { failpointEnv } from './failpoint-preload.js';
import { berth, exited, freePort, spawnBerth, waitForHealthy, wipeDataDir } from './processes.js';

export async function channelInstall(
  /** Where the clean-up goes: a test's context, or a benchmark's list of them. */
  t: Pick<TestContext, 'after'>,
  o: {
    /** The platform's settings (its API URL, …). */
    env: Record<string, string>;
    /** Host secrets by name: the bot token, a signing secret. */
    secrets: Record<string, string>;
    /** Closes the fake platform, after every berth process is gone. */
    closePlatform: () => Promise<void>;
  },
) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-channels-'));
  const port = await freePort();
  const env = {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_PORT: String(port),
    BERTH_URL: `http://127.0.0.1:${port}`,
    BERTH_LEASE: '2s',
    ...o.env,
  };
  const secrets = new SecretStore({ path: hostPaths(dataDir).secretsFile, key: '' });
  for (const [name, value] of Object.entries(o.secrets)) await secrets.set(name, value);
  const children: ChildProcess[] = [];
  let store: Store | undefined;
  t.after(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(children.map(exited));
    await store?.close();
    await o.closePlatform();
    await wipeDataDir(dataDir);
  });
  let ups = 0;
  /** `berth up` on `port` with `slots`, healthy; `failpoints` armed to SIGKILL it there. */
  const upWith = async (u: { failpoints?: FailpointName[]; port?: number; slots?: number }) => {
    const log = `up-${++ups}.log`;
    const at = u.port ?? port;
    const child = spawnBerth(
      ['up', '--slots', String(u.slots ?? 2)],
      { ...env, BERTH_PORT: String(at), ...(u.failpoints?.length ? failpointEnv(...u.failpoints) : {}) },
      dataDir,
      log,
    );
    children.push(child);
    await waitForHealthy(`http://127.0.0.1:${at}`, child, join(dataDir, log));
    store ??= await openStore({
      store: '',
      sqlitePath: join(dataDir, 'berth.db'),
      leaseMs: 2000,
      retry: { retryBaseMs: 500, retryMaxMs: 5000, maxTries: 5 },
    });
    return child;
  };
  const up = (...failpoints: FailpointName[]) => upWith({ failpoints });
  const cli = async (...args: string[]) => {
    const r = await berth(args, env);
    assert.equal(r.code, 0, `berth ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  const logs = async () => {
    let text = '';
    for (let i = 1; i <= ups; i++) text += await readFile(join(dataDir, `up-${i}.log`), 'utf8');
    return text;
  };
  return { dataDir, env, up, upWith, cli, logs, store: () => store! };
}

/** Every user message enqueued in the sessions named `<prefix>-…` (a platform's), sorted. */
export async function inboundTexts(store: Store, prefix: string): Promise<string[]> {
  const ids = (await store.listSessionViews(Date.now()))
    .map((s) => s.id)
    .filter((id) => id.startsWith(`${prefix}-`));
  const texts: string[] = [];
  for (const id of ids)
    for (const m of await store.listMessages(id, 0, 10_000)) if (m.direction === 'in') texts.push(m.text);
  return texts.sort();
}
