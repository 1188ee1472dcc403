/**
 * The per-platform part of the channel benchmarks, one driver a platform: the local fake
 * (test/helpers/fake-*.ts) started, berth's settings and secrets pointing at it, the
 * channel's POST /v1/channels body, a user's message sent, and the replies to it counted.
 * The benchmarks (channel-latency.ts, channel-restarts.ts) hold no platform code.
 */
import { FakeDiscord } from '../test/helpers/fake-discord.js';
import { FakeSlack } from '../test/helpers/fake-slack.js';
import { FakeTelegram } from '../test/helpers/fake-telegram.js';

/** A user's message as sent. */
export interface Said {
  /** When the platform had it and berth could take it (performance.now()), once it could. */
  receivedAt(): number | undefined;
  /** Replies to it so far. */
  replies(): number;
  /** When the platform received the first reply (performance.now()), once it did. */
  repliedAt(): number | undefined;
}

export interface ChannelDriver {
  /** How berth names this platform's sessions (`<prefix>-<channel>-<chat>`). */
  sessionPrefix: string;
  /** berth's settings pointing at the fake. */
  env: Record<string, string>;
  /** Host secrets the channel names. */
  secrets: Record<string, string>;
  /** The POST /v1/channels body, less its name and agent. */
  channel: Record<string, unknown>;
  /** Resolves once the new channel is connected to the platform (a message before that may predate its cursor). */
  ready(): Promise<void>;
  /** A user's message `text` in chat `chat` (0 … CHATS − 1) of the channel `name` of berth at `berthUrl`. */
  say(chat: number, text: string, to: { berthUrl: string; name: string }): Promise<Said>;
  close(): Promise<void>;
}

const TG_TOKEN = '1:bench';
const USER = { telegram: 'alice', slack: 'U0BENCH01', discord: '42' };

async function telegram(): Promise<ChannelDriver> {
  const fake = await new FakeTelegram(TG_TOKEN).start();
  return {
    sessionPrefix: 'tg',
    env: { BERTH_TELEGRAM_API_URL: fake.url },
    secrets: { tg: TG_TOKEN },
    channel: { platform: 'telegram', tokenSecret: 'tg', allowUsers: [`@${USER.telegram}`] },
    ready: async () => {},
    async say(chat, text) {
      const chatId = 100 + chat;
      const m = fake.userMessage({ chatId, userId: 7, username: USER.telegram, text });
      // Message ids count per chat, as Telegram's do: a reply is known by both.
      const replies = () => fake.sent.filter((r) => r.chatId === String(chatId) && r.replyTo === m.messageId);
      return {
        // Telegram's receipt is when berth's long poll takes the update.
        receivedAt: () => fake.arrivedAt.get(m.updateId),
        replies: () => replies().length,
        repliedAt: () => replies()[0]?.at,
      };
    },
    close: () => fake.close(),
  };
}

/** Slack over the Events API (signed HTTP requests to berth) or Socket Mode (a WebSocket berth opens). */
async function slack(socketMode: boolean): Promise<ChannelDriver> {
  const fake = await new FakeSlack('xoxb-bench', 'bench-signing', 'xapp-1-bench').start();
  return {
    sessionPrefix: 'sl',
    env: { BERTH_SLACK_API_URL: fake.url },
    secrets: { 'slack-bot': fake.token, 'slack-sign': fake.signingSecret, 'slack-app': fake.appToken },
    channel: {
      platform: 'slack',
      tokenSecret: 'slack-bot',
      ...(socketMode ? { appTokenSecret: 'slack-app' } : { signingSecret: 'slack-sign' }),
      // Slack's default is a session per thread, and every top-level message roots one.
      mapping: 'per-chat',
      allowUsers: [USER.slack],
    },
    ready: () => (socketMode ? until('Socket Mode connection', () => fake.socketOpen) : Promise.resolve()),
    async say(chat, text, to) {
      const channel = `C0BENCH${String(chat).padStart(2, '0')}`;
      const event = fake.messageEvent({ channel, user: USER.slack, text });
      const t0 = performance.now();
      if (socketMode) fake.socketEvent(event.body);
      // Retried as Slack retries while berth is down or restarting; one never acknowledged gets no reply: lost.
      else void fake.deliverWithRetries(`${to.berthUrl}/v1/channels/${to.name}/slack/events`, event.body);
      const replies = () => fake.posted.filter((p) => p.channel === channel && p.threadTs === event.ts);
      return { receivedAt: () => t0, replies: () => replies().length, repliedAt: () => replies()[0]?.at };
    },
    close: () => fake.close(),
  };
}

/** The chats a driver can send in: 0 … CHATS − 1. */
export const CHATS = 5;

const discordChannel = (chat: number) => `11000000000000001${String(chat).padStart(2, '0')}`;

async function discord(): Promise<ChannelDriver> {
  const fake = await new FakeDiscord('discord-bench-token', 2_000).start();
  return {
    sessionPrefix: 'dc',
    env: { BERTH_DISCORD_API_URL: fake.url },
    secrets: { 'discord-bot': fake.token },
    // Only allowed chats are read back after a restart (a fresh Gateway session).
    channel: {
      platform: 'discord',
      tokenSecret: 'discord-bot',
      allowUsers: [USER.discord],
      allowChats: Array.from({ length: CHATS }, (_, chat) => discordChannel(chat)),
    },
    ready: () => until('Gateway connection', () => fake.connected),
    async say(chat, text) {
      const channelId = discordChannel(chat);
      const t0 = performance.now();
      const m = fake.userMessage({ channelId, userId: USER.discord, content: text, guildId: 'G1' });
      const replies = () =>
        fake.botMessages(channelId).filter((r) => r.message_reference?.message_id === m.id);
      // The fake keeps no arrival time: the reply's is when it is first seen (polled every ms).
      let at: number | undefined;
      return {
        receivedAt: () => t0,
        replies: () => replies().length,
        repliedAt: () => {
          if (at === undefined && replies().length > 0) at = performance.now();
          return at;
        },
      };
    },
    close: () => fake.close(),
  };
}

export const channelDrivers = {
  telegram,
  slack: () => slack(false),
  slackSocketMode: () => slack(true),
  discord,
} satisfies Record<string, () => Promise<ChannelDriver>>;

export type ChannelPlatformName = keyof typeof channelDrivers;

/** Resolves once `done()` holds, looking every millisecond or so. */
export async function until(what: string, done: () => boolean, timeoutMs = 60_000): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`channel bench: no ${what} in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 1));
  }
}
