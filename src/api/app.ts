/** buildApp(deps): the HTTP API as a Fastify instance, not listening (tests use inject()). */
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { agentsRoutes } from './agents-routes.js';
import type { ApiDeps } from './deps.js';
import { installErrorHandler } from './error-handler.js';
import { eventsRoutes } from './events-routes.js';
import { sessionsRoutes } from './sessions-routes.js';
import { statusRoutes } from './status-routes.js';

/** Room above the largest message for the JSON around it. */
const BODY_SLACK_BYTES = 64 * 1024;

export async function buildApp(deps: ApiDeps & { log: Logger }): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.config.maxMessageBytes * 2 + BODY_SLACK_BYTES,
    // One line per request would drown the state-change logs that matter.
    logController: new LogController({ disableRequestLogging: true }),
  });
  installErrorHandler(app);
  await app.register(agentsRoutes, deps);
  await app.register(sessionsRoutes, deps);
  await app.register(eventsRoutes, deps);
  await app.register(statusRoutes, deps);
  return app;
}
