/**
 * A Telegram channel through restarts: `messages` user messages over 5 chats (one every
 * PACE_MS) to a real `berth up` child and the fake Bot API (test/helpers/fake-telegram.ts),
 * while berth is restarted every `restartEveryMs` — stopped (SIGTERM: a deploy; its drain
 * lets running turns finish) or killed (SIGKILL: a crash) and started again at once.
 * Baseline, same run: the same messages with no restart. Counted, from the fake's record of
 * every call and the store: messages lost (no reply), enqueued twice, and replies sent
 * more than once; and the wall time from the first message to the last reply.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostPaths } from '../src/core/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { openStore } from '../src/store/index.js';
import { FakeTelegram } from '../test/helpers/fake-telegram.js';
import { wipeDataDir } from '../test/helpers/machines.js';
import { berth, exited, freePort, spawnBerth, waitForHealthy } from '../test/helpers/processes.js';
import type { BenchOptions } from './harness.js';

const TOKEN = '1:restarts';
const CHATS = 5;
const PACE_MS = 50;

export async function channelRestarts({ quick }: BenchOptions) {
  const messages = quick ? 100 : 1000;
  const restartEveryMs = quick ? 3_000 : 10_000;
  const baseline = await run(messages, null, restartEveryMs);
  const stopped = await run(messages, 'SIGTERM', restartEveryMs);
  const killed = await run(messages, 'SIGKILL', restartEveryMs);
  return { bench: 'channel-restarts', messages, restartEveryMs, baseline, stopped, killed };
}

async function run(messages: number, signal: 'SIGTERM' | 'SIGKILL' | null, restartEveryMs: number) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-bench-restarts-'));
  const telegram = await new FakeTelegram(TOKEN).start();
  const port = await freePort();
  const env = {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_PORT: String(port),
    BERTH_URL: `http://127.0.0.1:${port}`,
    BERTH_TELEGRAM_API_URL: telegram.url,
    BERTH_CHANNEL_POLL_TIMEOUT: '2s',
    BERTH_LEASE: '2s',
    BERTH_LOG_LEVEL: 'warn',
  };
  await new SecretStore({ path: hostPaths(dataDir).secretsFile, key: '' }).set('tg', TOKEN);
  let ups = 0;
  const up = async () => {
    const log = `up-${++ups}.log`;
    const child = spawnBerth(['up', '--slots', '2'], env, dataDir, log);
    await waitForHealthy(env.BERTH_URL, child, join(dataDir, log));
    return child;
  };
  let child: ChildProcess = await up();
  const cli = async (...args: string[]) => {
    const r = await berth(args, env);
    if (r.code !== 0) throw new Error(`berth ${args.join(' ')}: ${r.stderr}`);
  };
  await cli('agent', 'create', 'sh', '--provider', 'command');
  await cli(
    'channel',
    'add',
    'telegram',
    '--name',
    'tg',
    '--agent',
    'sh',
    '--token-secret',
    'tg',
    '--allow',
    '@alice',
  );
  let restarts = 0;
  let sending = true;
  const restarter = (async () => {
    if (signal === null) return;
    while (sending) {
      await new Promise((r) => setTimeout(r, restartEveryMs));
      if (!sending) break;
      child.kill(signal);
      await exited(child);
      restarts++;
      child = await up();
    }
  })();
  const sent: { chatId: number; messageId: number; text: string }[] = [];
  const t0 = Date.now();
  for (let i = 0; i < messages; i++) {
    const chatId = 100 + (i % CHATS);
    const text = `echo m${i}`;
    sent.push({ chatId, text, ...telegram.userMessage({ chatId, userId: 7, username: 'alice', text }) });
    await new Promise((r) => setTimeout(r, PACE_MS));
  }
  // Message ids count per chat, as Telegram's do: a reply is known by both.
  const repliesTo = (m: (typeof sent)[number]) =>
    telegram.sent.filter((r) => r.chatId === String(m.chatId) && r.replyTo === m.messageId).length;
  const answered = () => sent.filter((m) => repliesTo(m) > 0).length;
  const deadline = Date.now() + 600_000;
  while (answered() < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  const wallMs = Date.now() - t0;
  sending = false;
  await restarter;
  await new Promise((r) => setTimeout(r, 2_000));
  const store = await openStore({
    store: '',
    sqlitePath: hostPaths(dataDir).storeFile,
    leaseMs: 2000,
    retry: { retryBaseMs: 500, retryMaxMs: 5000, maxTries: 5 },
  });
  let enqueuedTwice = 0;
  let inbound = 0;
  for (let c = 0; c < CHATS; c++) {
    const texts = (await store.listMessages(`tg-tg-${100 + c}`, 0, 10_000))
      .filter((m) => m.direction === 'in')
      .map((m) => m.text);
    inbound += texts.length;
    enqueuedTwice += texts.length - new Set(texts).size;
  }
  await store.close();
  let sentTwice = 0;
  for (const m of sent) sentTwice += Math.max(0, repliesTo(m) - 1);
  child.kill('SIGTERM');
  await exited(child);
  await telegram.close();
  await wipeDataDir(dataDir);
  return {
    restarts,
    lost: sent.length - answered(),
    enqueued: inbound,
    enqueuedTwice,
    sentTwice,
    wallMs,
  };
}
