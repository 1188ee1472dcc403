/**
 * A Telegram and a Slack channel's latency, against a baseline taken in the same run:
 *  - baseline: the same warm `command` turn posted over REST (POST → reply event);
 *  - telegram: a user's message arriving at the fake Bot API (test/helpers/fake-telegram.ts)
 *    → the reply's sendMessage reaching it, one message after the other in one chat
 *    (the session stays bound: warm), with a real long poll (25 s) waiting between them;
 *  - slack: the fake Slack (test/helpers/fake-slack.ts) starting its signed Events API
 *    request → the reply's chat.postMessage reaching it, one message after the other in
 *    one conversation (per-chat: one warm session).
 */
import { hostPaths } from '../src/core/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { FakeSlack } from '../test/helpers/fake-slack.js';
import { FakeTelegram } from '../test/helpers/fake-telegram.js';
import { type BenchOptions, benchHost, round, stats, timedMessage } from './harness.js';

const TOKEN = '1:bench';

export async function channelLatency({ quick }: BenchOptions) {
  const messages = quick ? 20 : 50;
  const telegram = await new FakeTelegram(TOKEN).start();
  const slack = await new FakeSlack('xoxb-bench', 'bench-signing').start();
  const h = await benchHost(
    { BERTH_IDLE_TIMEOUT: '10m', BERTH_TELEGRAM_API_URL: telegram.url, BERTH_SLACK_API_URL: slack.url },
    2,
  );
  try {
    const secrets = new SecretStore({ path: hostPaths(h.config.dataDir).secretsFile, key: '' });
    await secrets.set('tg', TOKEN);
    await secrets.set('slack-bot', slack.token);
    await secrets.set('slack-sign', slack.signingSecret);
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
    await h.client.request('POST', '/v1/channels', {
      platform: 'slack',
      name: 'benchsl',
      agent: 'b',
      tokenSecret: 'slack-bot',
      signingSecret: 'slack-sign',
      allowUsers: ['U0BENCH01'],
    });
    const endpoint = `${h.host.url}/v1/channels/benchsl/slack/events`;
    const slackMs: number[] = [];
    for (let i = 0; i <= messages; i++) {
      const before = slack.posted.length;
      const event = slack.messageEvent({ channel: 'C0BENCH01', user: 'U0BENCH01', text: 'echo hi' });
      const t0 = performance.now();
      const acked = await slack.deliver(endpoint, event.body);
      if (acked.status !== 200) throw new Error(`slack event answered ${acked.status}: ${acked.body}`);
      while (slack.posted.length === before) await new Promise((r) => setTimeout(r, 2));
      if (i > 0) slackMs.push(slack.posted.at(-1)!.at - t0);
    }
    const a = stats(api);
    const c = stats(channel);
    const sl = stats(slackMs);
    return {
      bench: 'channel-latency',
      baselineApiWarmMessageToReplyMs: a,
      telegramMessageToReplyMs: c,
      ratioTelegramToApiP50: round(c.p50 / a.p50),
      slackEventToReplyMs: sl,
      ratioSlackToApiP50: round(sl.p50 / a.p50),
    };
  } finally {
    await h.close();
    await telegram.close();
    await slack.close();
  }
}
