/** buildApp(deps): the HTTP API as a Fastify instance, not listening (tests use inject()). */
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import { agentsRoutes } from './agents-routes.js';
import { installAuth } from './auth.js';
import { ChangeFeed } from './change-feed.js';
import { channelsRoutes } from './channels-routes.js';
import { chaosRoutes } from './chaos-routes.js';
import { dashboardRoutes } from './dashboard-routes.js';
import type { ApiDeps } from './deps.js';
import { installErrorHandler } from './error-handler.js';
import { eventsRoutes } from './events-routes.js';
import { execRoutes } from './exec-routes.js';
import { grantsRoutes } from './grants-routes.js';
import { historyRoutes } from './history-routes.js';
import { BerthMetrics } from './metrics.js';
import { buildOpenApi } from './openapi.js';
import { RouteTable } from './route-table.js';
import { sandboxFilesRoutes } from './sandbox-files-routes.js';
import { schedulesRoutes } from './schedules-routes.js';
import { sessionsRoutes } from './sessions-routes.js';
import { slackEventsRoutes } from './slack-events-routes.js';
import { statusRoutes } from './status-routes.js';
import { telegramUpdatesRoutes } from './telegram-updates-routes.js';
import { tokensRoutes } from './tokens-routes.js';
import { webhooksRoutes } from './webhooks-routes.js';

/** Room above the largest message for the JSON around it. */
const BODY_SLACK_BYTES = 64 * 1024;
export const API_VERSION = '1.0.0';

export async function buildApp(deps: ApiDeps & { log: Logger }): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: deps.log as FastifyBaseLogger,
    bodyLimit: deps.config.maxMessageBytes * 2 + BODY_SLACK_BYTES,
    // One line per request would drown the state-change logs that matter.
    logController: new LogController({ disableRequestLogging: true }),
  });
  installErrorHandler(app);
  installAuth(app, deps.store);
  const routes = new RouteTable();
  // One change feed per process: the event streams and the metrics share its one reader.
  const feed = new ChangeFeed(deps.store, deps.clock, app.log, deps.streams?.feed);
  const pluginDeps = { ...deps, routes, feed };
  await app.register(agentsRoutes, pluginDeps);
  await app.register(grantsRoutes, pluginDeps);
  await app.register(sessionsRoutes, pluginDeps);
  await app.register(execRoutes, pluginDeps);
  await app.register(sandboxFilesRoutes, pluginDeps);
  await app.register(historyRoutes, pluginDeps);
  await app.register(eventsRoutes, pluginDeps);
  await app.register(statusRoutes, pluginDeps);
  await app.register(tokensRoutes, pluginDeps);
  await app.register(schedulesRoutes, pluginDeps);
  await app.register(webhooksRoutes, pluginDeps);
  await app.register(channelsRoutes, pluginDeps);
  await app.register(slackEventsRoutes, pluginDeps);
  await app.register(telegramUpdatesRoutes, pluginDeps);
  await app.register(chaosRoutes, pluginDeps);
  await app.register(dashboardRoutes);
  const metrics = deps.metrics ?? new BerthMetrics(deps);
  const stopMetrics = metrics.useFeed(feed);
  app.addHook('onClose', async () => {
    stopMetrics();
    feed.stop();
  });
  routes.add(
    app,
    {
      method: 'GET',
      url: '/metrics',
      summary: 'Prometheus metrics',
      tag: 'meta',
      access: 'admin',
      status: 200,
      returns: 'Prometheus text format',
    },
    async ({ reply }) => {
      const text = await metrics.render();
      void reply.type(metrics.contentType);
      return text;
    },
  );
  const openApi = buildOpenApi(routes.routes, API_VERSION);
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/openapi.json',
      summary: 'This document',
      tag: 'meta',
      access: 'public',
      status: 200,
      returns: 'OpenAPI 3 document',
    },
    async () => openApi,
  );
  return app;
}
