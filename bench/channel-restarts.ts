/**
 * Each chat channel through restarts: `messages` user messages over 5 chats (one every
 * PACE_MS) to a real `berth up` child and the platform's fake (bench/channel-drivers.ts:
 * Telegram, Slack over Socket Mode and over the Events API — whose fake retries an event
 * berth did not acknowledge, as Slack does, after 1, 2 and 4 s — and Discord), while berth is restarted every
 * `restartEveryMs` — stopped (SIGTERM: a deploy; its drain lets running turns finish) or
 * killed (SIGKILL: a crash) and started again at once. Baseline, same run: the same
 * messages with no restart. Counted, from the fake's record of every call and the store:
 * messages lost (no reply), enqueued twice, and replies sent more than once; and the wall
 * time from the first message to the last reply. BERTH_BENCH_CHANNEL=<platform> runs one.
 */
import type { ChildProcess } from 'node:child_process';
import { ApiClient } from '../src/client/index.js';
import { readAdminToken } from '../src/secrets/index.js';
import { channelInstall, inboundTexts } from '../test/helpers/channel-install.js';
import { exited } from '../test/helpers/processes.js';
import { CHATS, type ChannelPlatformName, channelDrivers, type Said } from './channel-drivers.js';
import type { BenchOptions } from './harness.js';

const PACE_MS = 50;
const PLATFORMS = [
  'telegram',
  'slack',
  'slackSocketMode',
  'discord',
] as const satisfies ChannelPlatformName[];

export async function channelRestarts({ quick }: BenchOptions) {
  const messages = quick ? 100 : 1000;
  const restartEveryMs = quick ? 3_000 : 10_000;
  // How long the last replies are waited for before the rest count as lost.
  const waitMs = quick ? 60_000 : 300_000;
  const only = process.env.BERTH_BENCH_CHANNEL;
  const result: Record<string, unknown> = { bench: 'channel-restarts', messages, restartEveryMs };
  for (const platform of PLATFORMS.filter((p) => only === undefined || p === only)) {
    result[platform] = {
      baseline: await run(platform, messages, null, restartEveryMs, waitMs),
      stopped: await run(platform, messages, 'SIGTERM', restartEveryMs, waitMs),
      killed: await run(platform, messages, 'SIGKILL', restartEveryMs, waitMs),
    };
  }
  return result;
}

async function run(
  platform: ChannelPlatformName,
  messages: number,
  signal: 'SIGTERM' | 'SIGKILL' | null,
  restartEveryMs: number,
  waitMs: number,
) {
  const driver = await channelDrivers[platform]();
  const cleanups: (() => Promise<void>)[] = [];
  try {
    const install = await channelInstall(
      { after: (fn) => void cleanups.push(fn as () => Promise<void>) },
      {
        // A short long poll (Telegram's): a stopping berth is not held by one.
        env: { ...driver.env, BERTH_CHANNEL_POLL_TIMEOUT: '2s', BERTH_LOG_LEVEL: 'warn' },
        secrets: driver.secrets,
        closePlatform: () => driver.close(),
      },
    );
    let child: ChildProcess = await install.up();
    await install.cli('agent', 'create', 'sh', '--provider', 'command');
    const to = { berthUrl: install.env.BERTH_URL, name: 'ch' };
    const api = new ApiClient(to.berthUrl, (await readAdminToken(install.dataDir)) ?? '');
    await api.request('POST', '/v1/channels', { ...driver.channel, name: to.name, agent: 'sh' });
    await driver.ready();
    let restarts = 0;
    let sending = true;
    const restarter = (async () => {
      while (signal !== null && sending) {
        await new Promise((r) => setTimeout(r, restartEveryMs));
        if (!sending) break;
        child.kill(signal);
        await exited(child);
        restarts++;
        child = await install.up();
      }
    })();
    const sent: Said[] = [];
    const t0 = Date.now();
    for (let i = 0; i < messages; i++) {
      sent.push(await driver.say(i % CHATS, `echo m${i}`, to));
      await new Promise((r) => setTimeout(r, PACE_MS));
    }
    const answered = () => sent.filter((m) => m.replies() > 0).length;
    const deadline = Date.now() + waitMs;
    while (answered() < sent.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const wallMs = Date.now() - t0;
    sending = false;
    await restarter;
    await new Promise((r) => setTimeout(r, 2_000));
    const inbound = await inboundTexts(install.store(), `${driver.sessionPrefix}-${to.name}`);
    return {
      restarts,
      lost: sent.length - answered(),
      enqueued: inbound.length,
      enqueuedTwice: inbound.length - new Set(inbound).size,
      sentTwice: sent.reduce((n, m) => n + Math.max(0, m.replies() - 1), 0),
      wallMs,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}
