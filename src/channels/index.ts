/**
 * channels: chat platforms (and email) in front of agents. A channel (a bot bound to one agent, its
 * row in the store) is polled by the ChannelRunner of exactly one host process (or, for a
 * platform that pushes, has its events committed by the API); each platform is one
 * PlatformClient (channel.ts). Depends on core and store only.
 */
export {
  type ChannelEvent,
  type ChannelSend,
  type PlatformClient,
  type PlatformClientFactory,
  PlatformError,
  type PlatformFailure,
  platformFailureOf,
} from './channel.js';
export { ChannelRunner, type ChannelRunnerDeps } from './channel-runner.js';
export { type ChannelSendDecision, decideChannelSendFailure } from './decide-send.js';
export {
  DISCORD_MAX_TEXT,
  DiscordClient,
  type DiscordOptions,
  discordClientFactory,
  discordNonce,
  type GatewayFrame,
  parseGatewayFrame,
  snowflakeAt,
  toDiscordInbound,
} from './discord.js';
export { EMAIL_MAX_TEXT, EmailClient, emailClientFactory } from './email.js';
export {
  parseSlackPush,
  SLACK_MAX_TEXT,
  SlackClient,
  type SlackOptions,
  type SlackPush,
  slackClientFactory,
  slackSignature,
  toMrkdwn,
  verifySlackSignature,
} from './slack.js';
export {
  TELEGRAM_MAX_TEXT,
  TelegramClient,
  type TelegramOptions,
  telegramClientFactory,
} from './telegram.js';
