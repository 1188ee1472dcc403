/**
 * /v1/channels: chat platforms in front of agents (docs/channels.md). Admin only: a channel
 * names a secret of the host's secret store as its bot token, and that store belongs to
 * the operator (a tenant naming a secret could send a provider key to the platform). A
 * channel's sessions still belong to its agent's tenant.
 */
import type { FastifyPluginAsync } from 'fastify';
import { BerthError, createChannelSchema, newId } from '../core/index.js';
import type { PluginDeps } from './deps.js';

const tag = 'channels';

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
      if ((body.platform === 'slack') !== (body.signingSecret !== undefined))
        throw new BerthError(
          'INVALID_INPUT',
          body.platform === 'slack'
            ? 'signingSecret: a Slack channel needs the name of its signing secret (berth secret set <name>, then --signing-secret <name>) (createChannel)'
            : `signingSecret: only Slack signs its requests; drop it for ${body.platform} (createChannel)`,
        );
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
      for (const secret of [body.tokenSecret, body.signingSecret])
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
      summary: 'List channels with their cursor, lease holder and last error',
      tag,
      access: 'admin',
      status: 200,
      returns: '{channels: Channel[]}',
    },
    async () => ({ channels: await store.listChannels() }),
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
      summary: "A channel's sends: replies, failure notices and refusals, with the platform's message ids",
      tag,
      access: 'admin',
      status: 200,
      returns: '{outbox: ChannelOutboxItem[]}',
    },
    async ({ params }) => {
      if (!(await store.getChannel(params.id!)))
        throw new BerthError('CHANNEL_NOT_FOUND', `Channel ${params.id} does not exist (listChannelOutbox)`);
      return { outbox: await store.listChannelOutbox(params.id!) };
    },
  );
};
