/**
 * Scheduled messages: POST/GET /v1/sessions/:id/schedules, GET /v1/schedules,
 * POST /v1/schedules/:id/{pause,resume,cancel}; each tenant its own. The API writes the
 * schedule; any host process's ScheduleRunner sends its due runs.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  assertSessionId,
  BY_CREATION,
  cursorPageQuerySchema,
  firstRunOf,
  nextCursor,
  type ScheduleStatus,
  scheduleInputSchema,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED, scopeOf } from './route-table.js';

const tag = 'schedules';
const MOVES: [string, ScheduleStatus][] = [
  ['pause', 'paused'],
  ['resume', 'active'],
  ['cancel', 'cancelled'],
];

export const schedulesRoutes: FastifyPluginAsync<PluginDeps> = async (app, { store, clock, routes }) => {
  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/schedules',
      summary: 'Schedule a recurring message to a session (cron in a time zone)',
      tag,
      access: 'tenant',
      status: 201,
      returns: 'Schedule',
      body: scheduleInputSchema,
    },
    async ({ params, body, principal }) => {
      const now = clock.now();
      const { agent, ...rest } = body;
      return store.createSchedule(
        {
          ...rest,
          ...(agent ? { agent } : {}),
          sessionId: assertSessionId(params.id!),
          nextRunAt: firstRunOf(body.cron, body.tz, now),
          tenant: scopeOf(principal),
        },
        now,
      );
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/schedules',
      summary: `A session's schedules, oldest first${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{schedules: Schedule[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ params, principal, query }) => {
      const schedules = await store.listSchedules(assertSessionId(params.id!), scopeOf(principal), query);
      return { schedules, next: nextCursor(schedules, query.limit, BY_CREATION) };
    },
  );
  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/schedules',
      summary: `All schedules, oldest first${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{schedules: Schedule[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ principal, query }) => {
      const schedules = await store.listSchedules(null, scopeOf(principal), query);
      return { schedules, next: nextCursor(schedules, query.limit, BY_CREATION) };
    },
  );
  for (const [move, status] of MOVES) {
    routes.add(
      app,
      {
        method: 'POST',
        url: `/v1/schedules/:id/${move}`,
        summary: `${move[0]!.toUpperCase()}${move.slice(1)} a schedule`,
        tag,
        access: 'tenant',
        status: 200,
        returns: 'Schedule',
      },
      async ({ params, principal }) =>
        store.moveScheduleTo(params.id!, status, clock.now(), scopeOf(principal)),
    );
  }
};
