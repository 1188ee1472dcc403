/**
 * POST /v1/channels/:id/slack/events: a Slack channel's Events API Request URL. Public (Slack
 * sends no berth token): the request is trusted only when signed with the channel's signing
 * secret (a host secret), which is checked on the raw body, so this plugin reads JSON as
 * text. Each event is committed once, keyed by its event_id, in one transaction with its
 * enqueue (store.commitChannelEvent), and only then acknowledged: a retried delivery is
 * acknowledged and writes nothing. Slack wants its answer within 3 s; a commit is one
 * store transaction. An allowed sender's files are fetched and stored before the commit
 * (stageAllowedFiles): a large one may outlast the 3 s, and Slack's retry of the event is
 * then acknowledged without a second commit.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  PUSHED_FILES_TIMEOUT_MS,
  parseSlackPush,
  SlackClient,
  stageAllowedFiles,
  verifySlackSignature,
} from '../channels/index.js';
import { BerthError } from '../core/index.js';
import { channelSecret } from './channel-secret.js';
import type { PluginDeps } from './deps.js';

export const slackEventsRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes, config, blobs } = deps;
  // Encapsulated in this plugin: the signature covers the exact bytes sent.
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, body, done) =>
    done(null, body),
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/channels/:id/slack/events',
      summary:
        "A Slack channel's Events API endpoint: signed by Slack, each event enqueued once by its event_id",
      tag: 'channels',
      access: 'public',
      status: 200,
      returns: '{ok: true} | {challenge}',
    },
    async ({ params, request }) => {
      const id = params.id!;
      const channel = await store.getChannel(id);
      if (channel?.platform !== 'slack' || channel.signingSecret === null)
        throw new BerthError(
          'CHANNEL_NOT_FOUND',
          `No Slack channel ${id} taking its events over HTTP (a Socket Mode channel has none) (slackEvents)`,
        );
      const secret = await channelSecret(deps, channel.signingSecret, id, 'slackEvents');
      const raw = typeof request.body === 'string' ? request.body : '';
      const header = (name: string) => {
        const value = request.headers[name];
        return Array.isArray(value) ? value[0] : value;
      };
      if (
        !verifySlackSignature(
          secret,
          header('x-slack-request-timestamp'),
          header('x-slack-signature'),
          raw,
          clock.now(),
        )
      )
        throw new BerthError(
          'CHANNEL_SIGNATURE_INVALID',
          `The request to channel ${id} is not signed with its signing secret, or is stale (slackEvents)`,
        );
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        throw new BerthError('INVALID_INPUT', 'body: not JSON (slackEvents)');
      }
      const push = parseSlackPush(channel, body);
      if (push.kind === 'malformed')
        throw new BerthError('INVALID_INPUT', `body: ${push.reason} (slackEvents)`);
      if (push.kind === 'challenge') return { challenge: push.challenge };
      let inbound = push.inbound;
      if (inbound?.attachments?.length && blobs) {
        const token = await channelSecret(deps, channel.tokenSecret, id, 'slackEvents');
        const client = new SlackClient({ apiUrl: config.slackApiUrl, token });
        // Not cut when Slack stops waiting (3 s): the event is still committed, its retry acknowledged.
        const signal = AbortSignal.timeout(PUSHED_FILES_TIMEOUT_MS);
        inbound = await stageAllowedFiles({ store, blobs }, channel, client, inbound, push.eventId, signal);
      }
      const outcome = await store.commitChannelEvent(id, push.eventId, inbound, clock.now());
      request.log.debug({ channelId: id, eventId: push.eventId, outcome }, 'Slack event committed');
      // Paused or removed meanwhile: not acknowledged, so Slack delivers it again later.
      if (outcome === 'stale')
        throw new BerthError('CHANNEL_NOT_ACCEPTING', `Channel ${id} is paused (slackEvents)`);
      return { ok: true };
    },
  );
};
