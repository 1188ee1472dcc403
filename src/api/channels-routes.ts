/**
 * /v1/channels: chat platforms in front of agents (docs/channels.md). Admin only: a channel
 * names a secret of the host's secret store as its bot token, and that store belongs to
 * the operator (a tenant naming a secret could send a provider key to the platform). A
 * channel's sessions still belong to its agent's tenant.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  BerthError,
  BY_CREATION,
  BY_SEQ,
  createChannelSchema,
  cursorPageQuerySchema,
  newId,
  nextCursor,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED } from './route-table.js';

const tag = 'channels';

/** What is wrong with the secrets and modes a new channel names for its platform, naming the fix; null when they fit. */
export function channelSecretsMisfit(body: {
  platform: string;
  signingSecret?: string | undefined;
  appTokenSecret?: string | undefined;
  webhookUrl?: string | undefined;
}): string | null {
  const { platform, signingSecret, appTokenSecret, webhookUrl } = body;
  if (appTokenSecret !== undefined && platform !== 'slack')
    return `appTokenSecret: only Slack has Socket Mode; drop it for ${platform}`;
  if (webhookUrl !== undefined && platform !== 'telegram')
    return `webhookUrl: only Telegram is set up with a webhook URL; drop it for ${platform}`;
  if (platform === 'slack' && (signingSecret === undefined) === (appTokenSecret === undefined))
    return 'signingSecret, appTokenSecret: a Slack channel needs one of them: the name of its signing secret (Events API over HTTP: --signing-secret <name>) or of its app-level token (Socket Mode: --socket-mode --app-token-secret <name>), after berth secret set <name>';
  if (platform === 'telegram' && (signingSecret === undefined) !== (webhookUrl === undefined))
    return 'signingSecret, webhookUrl: a Telegram webhook needs both its public base URL (--webhook-url) and the name of its secret_token (--signing-secret <name>, after berth secret set <name>); give neither for long polling';
  if (platform === 'discord' && signingSecret !== undefined)
    return 'signingSecret: Discord signs nothing berth reads; drop it';
  return null;
}

export const channelsRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes } = deps;

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/channels',
      summary: "Put a chat platform's bot in front of an agent (the bot token is a host secret, named here)",
      tag,
      access: 'admin',
      status: 201,
      returns: 'Channel',
      body: createChannelSchema,
    },
    async ({ body }) => {
      const agent = await store.getAgent(body.agent);
      if (!agent)
        throw new BerthError('AGENT_NOT_FOUND', `Agent ${body.agent} does not exist (createChannel)`);
      const misfit = channelSecretsMisfit(body);
      if (misfit !== null) throw new BerthError('INVALID_INPUT', `${misfit} (createChannel)`);
      if ((body.platform === 'email') !== (body.email !== undefined))
        throw new BerthError(
          'INVALID_INPUT',
          body.platform === 'email'
            ? 'email: an email channel needs its servers and address (--address, --imap-host, --smtp-host) (createChannel)'
            : `email: only an email channel has mail servers; drop it for ${body.platform} (createChannel)`,
        );
      if (body.platform === 'email' && body.allowChats.length > 0)
        throw new BerthError(
          'INVALID_INPUT',
          'allowChats: an email channel has no chats; allow senders with --allow alice@example.com or @example.com (createChannel)',
        );
      const names = deps.secretNames ? await deps.secretNames() : null;
      for (const secret of [body.tokenSecret, body.signingSecret, body.appTokenSecret])
        if (names && secret !== undefined && !names.includes(secret))
          throw new BerthError(
            'CHANNEL_TOKEN_MISSING',
            `Secret ${secret} is not in the host's secret store (createChannel)`,
          );
      return store.createChannel(
        {
          id: body.name ?? newId('ch').replace('_', ''),
          tenant: agent.tenant,
          platform: body.platform,
          agent: body.agent,
          mapping: body.mapping,
          // Mail addresses compare case-insensitively in practice (berth lowercases the sender's too).
          allowUsers:
            body.platform === 'email' ? body.allowUsers.map((u) => u.toLowerCase()) : body.allowUsers,
          allowChats: body.allowChats,
          tokenSecret: body.tokenSecret,
          signingSecret: body.signingSecret ?? null,
          appTokenSecret: body.appTokenSecret ?? null,
          webhookUrl: body.webhookUrl ?? null,
          respondTo: body.respondTo,
          email: body.email ?? null,
        },
        clock.now(),
      );
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/channels',
      summary: `List channels with their cursor, lease holder and last error, oldest first${PAGED}`,
      tag,
      access: 'admin',
      status: 200,
      returns: '{channels: Channel[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ query }) => {
      const channels = await store.listChannels(undefined, query);
      return { channels, next: nextCursor(channels, query.limit, BY_CREATION) };
    },
  );

  for (const [action, paused] of [
    ['pause', true],
    ['resume', false],
  ] as const)
    routes.add(
      app,
      {
        method: 'POST',
        url: `/v1/channels/:id/${action}`,
        summary: paused
          ? 'Pause a channel: nothing is read or sent; updates wait at the platform'
          : 'Resume a paused channel',
        tag,
        access: 'admin',
        status: 200,
        returns: 'Channel',
      },
      async ({ params }) => store.pauseChannel(params.id!, paused),
    );

  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/channels/:id',
      summary: 'Remove a channel (its sessions stay; sends still owed are not sent)',
      tag,
      access: 'admin',
      status: 204,
      returns: 'nothing',
    },
    async ({ params }) => {
      if (!(await store.deleteChannel(params.id!, clock.now())))
        throw new BerthError('CHANNEL_NOT_FOUND', `Channel ${params.id} does not exist (deleteChannel)`);
      return undefined;
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/channels/:id/outbox',
      summary: `A channel's sends: replies, failure notices and refusals, with the platform's message ids, oldest first${PAGED}`,
      tag,
      access: 'admin',
      status: 200,
      returns: '{outbox: ChannelOutboxItem[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ params, query }) => {
      if (!(await store.getChannel(params.id!)))
        throw new BerthError('CHANNEL_NOT_FOUND', `Channel ${params.id} does not exist (listChannelOutbox)`);
      const outbox = await store.listChannelOutbox(params.id!, query);
      return { outbox, next: nextCursor(outbox, query.limit, BY_SEQ) };
    },
  );
};
