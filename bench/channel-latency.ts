/**
 * A Telegram channel's latency, against a baseline taken in the same run:
 *  - baseline: the same warm `command` turn posted over REST (POST → reply event);
 *  - channel: a user's message arriving at the fake Bot API (test/helpers/fake-telegram.ts)
 *    → the reply's sendMessage reaching it, one message after the other in one chat
 *    (the session stays bound: warm), with a real long poll (25 s) waiting between them.
 */
import { hostPaths } from '../src/core/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { FakeTelegram } from '../test/helpers/fake-telegram.js';
import { type BenchOptions, benchHost, round, stats, timedMessage } from './harness.js';

const TOKEN = '1:bench';

export async function channelLatency({ quick }: BenchOptions) {
  const messages = quick ? 20 : 50;
  const telegram = await new FakeTelegram(TOKEN).start();
  const h = await benchHost({ BERTH_IDLE_TIMEOUT: '10m', BERTH_TELEGRAM_API_URL: telegram.url }, 2);
  try {
    await new SecretStore({ path: hostPaths(h.config.dataDir).secretsFile, key: '' }).set('tg', TOKEN);
    await h.client.request('POST', '/v1/channels', {
      platform: 'telegram',
      name: 'bench',
      agent: 'b',
      tokenSecret: 'tg',
      allowUsers: ['@alice'],
    });
    const api: number[] = [];
    await timedMessage(h.client, 'api', 'true'); // boots its sandbox
    for (let i = 0; i < messages; i++) api.push((await timedMessage(h.client, 'api', 'echo hi')).replyMs);

    const channel: number[] = [];
    for (let i = 0; i <= messages; i++) {
      const before = telegram.sent.length;
      const { updateId } = telegram.userMessage({ chatId: 1, userId: 7, username: 'alice', text: 'echo hi' });
      while (telegram.sent.length === before) await new Promise((r) => setTimeout(r, 2));
      // The first one boots the chat's sandbox: not counted.
      if (i > 0) channel.push(telegram.sent.at(-1)!.at - telegram.arrivedAt.get(updateId)!);
    }
    const a = stats(api);
    const c = stats(channel);
    return {
      bench: 'channel-latency',
      baselineApiWarmMessageToReplyMs: a,
      telegramMessageToReplyMs: c,
      ratioTelegramToApiP50: round(c.p50 / a.p50),
    };
  } finally {
    await h.close();
    await telegram.close();
  }
}
