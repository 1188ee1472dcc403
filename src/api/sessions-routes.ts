/** /v1/sessions: post a message (creating the session on first use), read a session, its messages and turns. */
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import { assertSessionId, BerthError } from '../core/index.js';
import type { ApiDeps } from './deps.js';
import { parseInput } from './validate.js';

const messageBody = z
  .object({ text: z.string().min(1, 'text must not be empty'), agent: z.string().min(1).optional() })
  .strict();
const pageQuery = z.object({
  after: z.coerce.number().int().min(0).default(0),
  limit: z.coerce.number().int().min(1).max(500).default(100),
});

type SessionParams = { Params: { id: string } };

export const sessionsRoutes: FastifyPluginAsync<ApiDeps> = async (app, { store, clock, config }) => {
  app.post<SessionParams>('/v1/sessions/:id/messages', async (request, reply) => {
    const sessionId = assertSessionId(request.params.id);
    const body = parseInput(messageBody, request.body, 'message');
    const bytes = Buffer.byteLength(body.text);
    if (bytes > config.maxMessageBytes) {
      throw new BerthError(
        'MESSAGE_TOO_LARGE',
        `Message of ${bytes} bytes is over the limit of ${config.maxMessageBytes} bytes`,
      );
    }
    const { message, view, eventId } = await store.enqueueMessage({
      sessionId,
      agent: body.agent,
      text: body.text,
      now: clock.now(),
    });
    return reply.status(202).send({ message, session: view, eventId });
  });

  app.get('/v1/sessions', async () => ({ sessions: await store.listSessionViews(clock.now()) }));

  app.get<SessionParams>('/v1/sessions/:id', async (request) => {
    const sessionId = assertSessionId(request.params.id);
    const view = await store.getSessionView(sessionId, clock.now());
    if (!view) throw new BerthError('SESSION_NOT_FOUND', `Session ${sessionId} does not exist`);
    return view;
  });

  app.get<SessionParams>('/v1/sessions/:id/messages', async (request) => {
    const sessionId = assertSessionId(request.params.id);
    const { after, limit } = parseInput(pageQuery, request.query, 'query');
    const messages = await store.listMessages(sessionId, after, limit);
    return { messages, next: messages.length === limit ? messages.at(-1)!.id : null };
  });

  app.get<SessionParams>('/v1/sessions/:id/turns', async (request) => ({
    turns: await store.listTurns(assertSessionId(request.params.id)),
  }));
};
