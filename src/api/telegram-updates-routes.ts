/**
 * POST /v1/channels/:id/telegram/updates: a Telegram channel's webhook (webhook mode). Public
 * (Telegram sends no berth token): a request is trusted only when it carries the channel's
 * secret_token (a host secret, given to Telegram by setWebhook) in
 * `X-Telegram-Bot-Api-Secret-Token`, compared in constant time. Each update is committed
 * once, keyed by its update_id, in one transaction with its enqueue (store.commitChannelEvent),
 * and only then answered 200: Telegram delivers an update again until it gets a 2xx, and a
 * repeat finds the id and writes nothing. An allowed sender's files are fetched and stored
 * before the commit (stageAllowedFiles), as when the channel is polled.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  PUSHED_FILES_TIMEOUT_MS,
  stageAllowedFiles,
  TelegramClient,
  type TelegramUpdate,
  verifyTelegramSecretToken,
} from '../channels/index.js';
import { BerthError, type Channel } from '../core/index.js';
import { channelSecret } from './channel-secret.js';
import type { PluginDeps } from './deps.js';

export const telegramUpdatesRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes, config, blobs } = deps;
  // One client per channel and token, kept for the bot's name (asked once, for --respond mention).
  const clients = new Map<string, { token: string; client: TelegramClient }>();
  const clientOf = (channel: Channel, token: string): TelegramClient => {
    const kept = clients.get(channel.id);
    if (kept?.token === token) return kept.client;
    const client = new TelegramClient({ apiUrl: config.telegramApiUrl, token, respondTo: channel.respondTo });
    clients.set(channel.id, { token, client });
    return client;
  };
  const secretOf = (name: string, id: string) => channelSecret(deps, name, id, 'telegramUpdates');

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/channels/:id/telegram/updates',
      summary:
        "A Telegram channel's webhook: carries the channel's secret_token, each update enqueued once by its update_id",
      tag: 'channels',
      access: 'public',
      status: 200,
      returns: '{ok: true}',
    },
    async ({ params, request }) => {
      const id = params.id!;
      const channel = await store.getChannel(id);
      if (channel?.platform !== 'telegram' || channel.webhookUrl === null || channel.signingSecret === null)
        throw new BerthError(
          'CHANNEL_NOT_FOUND',
          `No Telegram channel ${id} in webhook mode (telegramUpdates)`,
        );
      const header = request.headers['x-telegram-bot-api-secret-token'];
      if (
        !verifyTelegramSecretToken(
          await secretOf(channel.signingSecret, id),
          Array.isArray(header) ? header[0] : header,
        )
      )
        throw new BerthError(
          'CHANNEL_SIGNATURE_INVALID',
          `The request to channel ${id} does not carry its webhook secret_token (telegramUpdates)`,
        );
      const update = request.body as TelegramUpdate | null;
      if (typeof update !== 'object' || update === null || !Number.isSafeInteger(update.update_id))
        throw new BerthError(
          'INVALID_INPUT',
          'body: a Telegram Update with a numeric update_id (telegramUpdates)',
        );
      const client = clientOf(channel, await secretOf(channel.tokenSecret, id));
      let inbound = await client.inboundOf(update, AbortSignal.timeout(10_000));
      // An allowed sender's files are stored before the commit, as when polled.
      if (blobs)
        inbound = await stageAllowedFiles(
          { store, blobs },
          channel,
          client,
          inbound,
          String(update.update_id),
          AbortSignal.timeout(PUSHED_FILES_TIMEOUT_MS),
        );
      const outcome = await store.commitChannelEvent(id, String(update.update_id), inbound, clock.now());
      request.log.debug({ channelId: id, updateId: update.update_id, outcome }, 'Telegram update committed');
      // Paused or removed meanwhile: not acknowledged, so Telegram delivers it again later.
      if (outcome === 'stale')
        throw new BerthError('CHANNEL_NOT_ACCEPTING', `Channel ${id} is paused (telegramUpdates)`);
      return { ok: true };
    },
  );
};
