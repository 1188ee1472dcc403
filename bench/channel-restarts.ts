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
import { channelInstall, inboundTexts } from '../test/helpers/channel-install.js';
import { FakeTelegram } from '../test/helpers/fake-telegram.js';
import { exited } from '../test/helpers/processes.js';
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
  const telegram = await new FakeTelegram(TOKEN).start();
  const cleanups: (() => Promise<void>)[] = [];
  try {
    const install = await channelInstall(
      { after: (fn) => void cleanups.push(fn as () => Promise<void>) },
      {
        env: {
          BERTH_TELEGRAM_API_URL: telegram.url,
          BERTH_CHANNEL_POLL_TIMEOUT: '2s',
          BERTH_LOG_LEVEL: 'warn',
        },
        secrets: { tg: TOKEN },
        closePlatform: () => telegram.close(),
      },
    );
    let child: ChildProcess = await install.up();
    await install.cli('agent', 'create', 'sh', '--provider', 'command');
    await install.cli(
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
      while (signal !== null && sending) {
        await new Promise((r) => setTimeout(r, restartEveryMs));
        if (!sending) break;
        child.kill(signal);
        await exited(child);
        restarts++;
        child = await install.up();
      }
    })();
    const sent: { chatId: number; messageId: number }[] = [];
    const t0 = Date.now();
    for (let i = 0; i < messages; i++) {
      const chatId = 100 + (i % CHATS);
      sent.push({
        chatId,
        ...telegram.userMessage({ chatId, userId: 7, username: 'alice', text: `echo m${i}` }),
      });
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
    const inbound = await inboundTexts(install.store(), 'tg-tg');
    return {
      restarts,
      lost: sent.length - answered(),
      enqueued: inbound.length,
      enqueuedTwice: inbound.length - new Set(inbound).size,
      sentTwice: sent.reduce((n, m) => n + Math.max(0, repliesTo(m) - 1), 0),
      wallMs,
    };
  } finally {
    for (const cleanup of cleanups.reverse()) await cleanup();
  }
}
