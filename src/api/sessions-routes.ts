/**
 * /v1/sessions: create, list (filters), get (with queue ETA), delete (stop and archive);
 * messages (post, cursor pages, cancel one still queued), turns, and interrupting the
 * running turn. A tenant sees only its own sessions: another
 * tenant's answer 404, exactly like one that does not exist.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  assertSessionId,
  BerthError,
  BY_CREATION,
  BY_START,
  createSessionSchema,
  cursorPageQuerySchema,
  forkSessionSchema,
  interruptQuerySchema,
  listSessionsQuerySchema,
  messageIdSchema,
  newId,
  nextCursor,
  pageQuerySchema,
  postMessageSchema,
  type SessionView,
} from '../core/index.js';
import type { PluginDeps } from './deps.js';
import { ownSessionView } from './own-session.js';
import { PAGED, scopeOf } from './route-table.js';
import { parseInput } from './validate.js';

const tag = 'sessions';
/** Committed turns the ETA averages over. */
const ETA_SAMPLE_TURNS = 50;

export interface SessionWithEta extends SessionView {
  /** Expected wait before this session's turn starts, in ms; null when not queued or nothing to go by yet. */
  etaMs: number | null;
}

export const sessionsRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, config, routes } = deps;

  /** Position x mean turn time / live slots: a rough figure, and labelled so in the docs. */
  const withEta = async (views: SessionView[]): Promise<SessionWithEta[]> => {
    const queued = views.some((v) => v.queuePosition !== null);
    const meanMs = queued ? await store.meanTurnMs(ETA_SAMPLE_TURNS) : null;
    const slots = queued ? await store.liveSlots(clock.now()) : 0;
    return views.map((v) => ({
      ...v,
      etaMs:
        v.queuePosition === null || meanMs === null || slots === 0
          ? null
          : Math.ceil(v.queuePosition / slots) * meanMs,
    }));
  };
  const ownView = (id: string, tenant: string | undefined) => ownSessionView(store, clock, id, tenant);

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions',
      summary: 'Create a session (no message yet)',
      tag,
      access: 'tenant',
      status: 201,
      returns: 'SessionView',
      body: createSessionSchema,
    },
    async ({ body, principal }) => {
      const sessionId = body.id === undefined ? newId('s') : assertSessionId(body.id);
      return store.createSession({
        sessionId,
        agent: body.agent,
        now: clock.now(),
        tenant: scopeOf(principal),
      });
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions',
      summary:
        'List sessions, a page at a time in creation order (limit: default 100, at most 500), optionally by status and agent; `next` is the cursor of the next page (null: the last)',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{sessions: SessionView & {etaMs}[], next: string | null}',
      query: listSessionsQuerySchema,
    },
    async ({ query, principal }) => {
      const page = await store.listSessionViews(clock.now(), scopeOf(principal), {
        after: query.after,
        limit: query.limit,
      });
      const wanted = page.filter(
        (v) =>
          (query.status === undefined || v.status === query.status) &&
          (query.agent === undefined || v.agent === query.agent) &&
          (query.archived === 'true' || query.status === 'archived' || v.archivedAt === null),
      );
      const next = nextCursor(page, query.limit, BY_CREATION);
      return { sessions: await withEta(wanted), next };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id',
      summary: 'A session: status, generation, queue position and ETA, current turn, last reply',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'SessionView & {etaMs}',
    },
    async ({ params, principal }) => (await withEta([await ownView(params.id!, scopeOf(principal))]))[0],
  );

  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/sessions/:id',
      summary: 'Stop and archive a session: open messages fail, its sandbox is fenced off',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'SessionView',
    },
    async ({ params, principal }) =>
      store.archiveSession(assertSessionId(params.id!), clock.now(), scopeOf(principal)),
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/recycle',
      summary: "Replace a resident session's sandbox after its current turn (nothing queued is lost)",
      tag,
      access: 'tenant',
      status: 202,
      returns: 'SessionView',
    },
    async ({ params, principal }) =>
      store.requestRecycle(assertSessionId(params.id!), clock.now(), scopeOf(principal)),
  );

  for (const [url, resetWorkspace, summary] of [
    [
      '/v1/sessions/:id/resume',
      false,
      'Let a held session go on as it is: its messages are queued again (held again if its resident workspace is still missing)',
    ],
    [
      '/v1/sessions/:id/reset-workspace',
      true,
      "Accept the loss of a held session's resident workspace: it goes on with an empty one (recorded in the audit log)",
    ],
  ] as const)
    routes.add(
      app,
      { method: 'POST', url, summary, tag, access: 'tenant', status: 200, returns: 'SessionView' },
      async ({ params, principal }) =>
        store.releaseHold({
          sessionId: assertSessionId(params.id!),
          resetWorkspace,
          now: clock.now(),
          tenant: scopeOf(principal),
        }),
    );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/fork',
      summary:
        "A new session of the same agent whose workspace starts from one of this one's retained versions (default: the current one) and whose state is this one's (its objects shared, not copied)",
      tag,
      access: 'tenant',
      status: 201,
      returns: 'SessionView',
      body: forkSessionSchema,
    },
    async ({ params, body, principal }) => {
      if (body.fromVersion !== undefined) {
        // A resident agent writes its workspace in place: it has no older version to start from.
        const source = await ownSessionView(store, clock, params.id!, scopeOf(principal));
        if ((await store.getAgent(source.agent))?.mode === 'resident')
          throw new BerthError(
            'VERSION_NOT_RETAINED',
            `Session ${source.id} keeps no workspace history: its resident agent writes the workspace in place, with no chain of versions (fork from version ${body.fromVersion})`,
          );
      }
      return store.forkSession({
        sourceId: assertSessionId(params.id!),
        sessionId: body.id === undefined ? newId('s') : assertSessionId(body.id),
        ...(body.fromVersion === undefined ? {} : { fromVersion: body.fromVersion }),
        now: clock.now(),
        tenant: scopeOf(principal),
      });
    },
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/messages',
      summary: 'Post a message (creates the session on first use with "agent")',
      tag,
      access: 'tenant',
      status: 202,
      returns: '{message: Message, session: SessionView, eventId}',
      body: postMessageSchema,
    },
    async ({ params, body, principal }) => {
      const sessionId = assertSessionId(params.id!);
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
        tenant: scopeOf(principal),
      });
      return { message, session: view, eventId };
    },
  );

  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/sessions/:id/messages/:mid',
      summary:
        'Take back a queued message (pending, also one waiting out a retry): it ends cancelled and is never run; 409 MESSAGE_NOT_PENDING once a turn took it',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{message: Message}',
    },
    async ({ params, principal }) => {
      const messageId = parseInput(messageIdSchema, params.mid, 'params');
      const message = await store.cancelMessage({
        sessionId: assertSessionId(params.id!),
        messageId,
        now: clock.now(),
        tenant: scopeOf(principal),
      });
      return { message };
    },
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/interrupt',
      summary:
        'Stop the running turn now: its workspace changes are discarded (discard=true, the only form until checkpoints), its messages end interrupted, the session goes on with its next message; 409 NO_RUNNING_TURN when none runs (or it committed first)',
      tag,
      access: 'tenant',
      status: 202,
      returns: '{turn: Turn}',
      query: interruptQuerySchema,
    },
    async ({ params, query, principal }) => {
      const turn = await store.requestInterrupt({
        sessionId: assertSessionId(params.id!),
        ...(query.turn === undefined ? {} : { turnId: query.turn }),
        now: clock.now(),
        tenant: scopeOf(principal),
      });
      return { turn };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/messages',
      summary: 'Messages of a session, oldest first, a page at a time',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{messages: Message[], next: number | null}',
      query: pageQuerySchema,
    },
    async ({ params, query, principal }) => {
      const view = await ownView(params.id!, scopeOf(principal));
      const messages = await store.listMessages(view.id, query.after, query.limit);
      return { messages, next: messages.length === query.limit ? messages.at(-1)!.id : null };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/turns',
      summary: `Turns of a session: attempts, timings, errors, in the order they started${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{turns: Turn[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ params, principal, query }) => {
      const view = await ownView(params.id!, scopeOf(principal));
      const turns = await store.listTurns(view.id, query);
      return { turns, next: nextCursor(turns, query.limit, BY_START) };
    },
  );
};
