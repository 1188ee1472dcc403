/**
 * channels: chat platforms (and email) in front of agents. A channel (a bot bound to one agent, its
 * row in the store) is polled by the ChannelRunner of exactly one host process (or, for a
 * platform that pushes, has its events committed by the API); each platform is one
 * PlatformClient (channel.ts). Beside them the webhook dispatcher, the same kind of thing:
 * an outbox in the store sent to an outside endpoint. Depends on core, store and blobs
 * (where the files users send wait for their turn).
 */
export {
  type ChannelEvent,
  type ChannelSecrets,
  type ChannelSend,
  type PlatformClient,
  type PlatformClientFactory,
  PlatformError,
  type PlatformFailure,
  platformFailureOf,
} from './channel.js';
export { PUSHED_FILES_TIMEOUT_MS, stageAllowedFiles, stageChannelFiles } from './channel-inbox.js';
export { ChannelRunner, type ChannelRunnerDeps } from './channel-runner.js';
export { type ChannelSendDecision, decideChannelSendFailure } from './decide-send.js';
export { DISCORD_MAX_TEXT, DiscordClient, type DiscordOptions, discordClientFactory } from './discord.js';
export {
  discordNonce,
  type GatewayFrame,
  parseGatewayFrame,
  snowflakeAt,
  toDiscordInbound,
} from './discord-wire.js';
export { EMAIL_MAX_TEXT, EmailClient, emailClientFactory } from './email.js';
export {
  parseSlackPush,
  SLACK_MAX_TEXT,
  SlackClient,
  type SlackOptions,
  type SlackPush,
  slackClientFactory,
  slackSignature,
  verifySlackSignature,
} from './slack.js';
export { parseSocketFrame, type SocketFrame } from './slack-socket.js';
export {
  TELEGRAM_MAX_TEXT,
  type TelegramBot,
  TelegramClient,
  type TelegramOptions,
  type TelegramUpdate,
  telegramClientFactory,
  telegramWebhookUrl,
  toTelegramInbound,
  verifyTelegramSecretToken,
} from './telegram.js';
export { type DeliveryOutcome, WebhookDispatcher } from './webhook-dispatcher.js';
