/**
 * A session's history: one turn and what the store keeps of it, its timeline (its tries,
 * model calls, tool calls, checkpoints, kills and resumes), what a committed turn
 * changed in the workspace (its diff), and the workspace as of any retained version
 * (a directory listed, a file read). Tenant-checked like every session route: another
 * tenant's session answers 404, exactly like one that does not exist.
 *
 * A turn is named by its id (`turn_…`) or by the workspace version its commit made (`3`);
 * a version a rewind made has no turn, and its diff is asked for by that version.
 * The workspace is read from the session's chain in the blob store (WorkspaceHistory),
 * never from a worker's copy, so any API process reaching the store and the blobs answers.
 */
import type { FastifyPluginAsync } from 'fastify';
import {
  BerthError,
  buildTurnTimeline,
  chainBytes,
  filesQuerySchema,
  objectsOfVersion,
  type Principal,
  retainedVersions,
  rewindSessionSchema,
  rewindsOf,
  type SessionView,
  type TurnRecord,
  type TurnTimeline,
  turnDetailOf,
  versionOfTurn,
  type WorkspaceChain,
  type WorkspaceSummary,
} from '../core/index.js';
import type { WorkspaceHistory } from '../workspace/index.js';
import type { PluginDeps } from './deps.js';
import { ownSessionView } from './own-session.js';
import { scopeOf } from './route-table.js';

const tag = 'sessions';

export const historyRoutes: FastifyPluginAsync<PluginDeps> = async (app, deps) => {
  const { store, clock, routes } = deps;

  /** The caller's session and the turn `ref` names in it (a turn id, or the version a committed turn made), with its record. */
  const ownTurn = async (
    params: Record<string, string>,
    principal: Principal,
  ): Promise<{ view: SessionView; record: TurnRecord }> => {
    const view = await ownSessionView(store, clock, params.id!, scopeOf(principal));
    const ref = params.turn!;
    let turnId = ref;
    if (/^\d+$/.test(ref)) {
      const version = Number(ref);
      const turn = (await store.listTurns(view.id)).find((t) => versionOfTurn(t) === version);
      if (!turn)
        throw new BerthError(
          'SESSION_TURN_NOT_FOUND',
          `No committed turn of session ${view.id} made workspace version ${version} (it is at version ${view.workspaceVersion})`,
        );
      turnId = turn.id;
    }
    const record = await store.getTurnRecord(view.id, turnId);
    if (!record) throw new BerthError('SESSION_TURN_NOT_FOUND', `Session ${view.id} has no turn ${ref}`);
    return { view, record };
  };

  /** The reader, the chain, and whether the session's agent writes its workspace in place (no chain). */
  const workspaceOf = async (
    view: SessionView,
  ): Promise<{ history: WorkspaceHistory; chain: WorkspaceChain; resident: boolean }> => {
    if (!deps.history)
      throw new BerthError(
        'INTERNAL',
        'This API was built without a blob store: workspace history cannot be read',
      );
    const agent = await store.getAgent(view.agent);
    return {
      history: deps.history,
      chain: await store.getWorkspaceChain(view.id),
      resident: agent?.mode === 'resident',
    };
  };

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/turns/:turn',
      summary:
        'One turn (by id, or by the workspace version its commit made): its attempts, messages, replies, state it still holds, timing and faults',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'TurnDetail',
    },
    async ({ params, principal }) => turnDetailOf((await ownTurn(params, principal)).record),
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/turns/:turn/timeline',
      summary:
        "A turn's timeline: each try of its messages (a bar: start, end, how it ended and the checkpoint it resumed from) and, in time order, its model calls, tool calls, checkpoints, progress, replies, the kill of a try (its code) and the resume of the next. Poll it while `running`, or follow the session's events",
      tag,
      access: 'tenant',
      status: 200,
      returns: 'TurnTimeline',
    },
    async ({ params, principal }): Promise<TurnTimeline> => {
      const { view, record } = await ownTurn(params, principal);
      const activity = await store.turnActivity(view.id, record.attempts);
      return buildTurnTimeline(record, activity);
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/turns/:turn/diff',
      summary:
        'What a committed turn changed in the workspace: files added, modified, deleted and renamed, text diffs for text files, sizes for the rest. A version a rewind made (it has no turn) gives what the rewind changed: the tree it went back to against the one before',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'TurnDiff & {turnId: string | null, rewoundTo?: number}',
    },
    async ({ params, principal }) => {
      if (/^\d+$/.test(params.turn!)) {
        const view = await ownSessionView(store, clock, params.id!, scopeOf(principal));
        const { history, chain, resident } = await workspaceOf(view);
        const rewind = rewindsOf(chain).find((r) => r.version === Number(params.turn));
        if (rewind)
          return {
            turnId: null,
            rewoundTo: rewind.toVersion,
            ...(await history.diff(chain, rewind.version, resident)),
          };
      }
      const { view, record } = await ownTurn(params, principal);
      const { turn } = record;
      if (turn.status !== 'committed')
        throw new BerthError(
          'TURN_NOT_COMMITTED',
          `Turn ${turn.id} of session ${view.id} is ${turn.status}: it changed nothing (diff)`,
        );
      const version = versionOfTurn(turn);
      const { history, chain, resident } = await workspaceOf(view);
      if (version === null && !resident)
        throw new BerthError(
          'VERSION_NOT_RETAINED',
          `Turn ${turn.id} of session ${view.id} committed before workspace versions were recorded; its changes are not kept`,
        );
      return { turnId: turn.id, ...(await history.diff(chain, version ?? 0, resident)) };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/files',
      summary:
        "The workspace as of a retained version (default: the current one): a directory's entries as JSON, or a file's bytes",
      tag,
      access: 'tenant',
      status: 200,
      returns:
        'WorkspacePathInfo (a dir or a link) as JSON, or a file as application/octet-stream with x-berth-version, x-berth-mode',
      query: filesQuerySchema,
    },
    async ({ params, query, principal, reply }) => {
      const view = await ownSessionView(store, clock, params.id!, scopeOf(principal));
      const { history, chain, resident } = await workspaceOf(view);
      const version = query.version ?? chain.version;
      const { info, body } = await history.read(chain, version, query.path, resident);
      if (info.type !== 'file') return info;
      return reply
        .status(200)
        .header('content-type', 'application/octet-stream')
        .header('content-length', info.size)
        .header('x-berth-version', version)
        .header('x-berth-path', encodeURIComponent(query.path))
        .header('x-berth-mode', info.mode.toString(8))
        .send(body);
    },
  );

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/sessions/:id/rewind',
      summary:
        "The session's workspace goes back to a retained version's, as a new version (history is kept); refused while it answers messages",
      tag,
      access: 'tenant',
      status: 200,
      returns: 'RewindResult',
      body: rewindSessionSchema,
    },
    async ({ params, body, principal }) => {
      const view = await ownSessionView(store, clock, params.id!, scopeOf(principal));
      const { history, chain, resident } = await workspaceOf(view);
      if (resident)
        throw new BerthError(
          'VERSION_NOT_RETAINED',
          `Session ${view.id} keeps no workspace history: its resident agent writes the workspace in place, with no chain of versions (rewind)`,
        );
      // A version's snapshot names at least one object: an empty tree gets a tiny one of its own.
      const objects = objectsOfVersion(chain, body.toVersion);
      const emptyTree = objects !== null && objects.length === 0 ? await history.emptyTree() : undefined;
      return store.rewindSession({
        sessionId: view.id,
        toVersion: body.toVersion,
        now: clock.now(),
        tenant: scopeOf(principal),
        ...(emptyTree ? { emptyTree } : {}),
      });
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/sessions/:id/workspace',
      summary:
        "What the session's workspace history keeps (the retained versions, the agent's retention policy) and what it costs: objects and bytes in the blob store",
      tag,
      access: 'tenant',
      status: 200,
      returns: 'WorkspaceSummary',
    },
    async ({ params, principal }): Promise<WorkspaceSummary> => {
      const view = await ownSessionView(store, clock, params.id!, scopeOf(principal));
      const chain = await store.getWorkspaceChain(view.id);
      const agent = await store.getAgent(view.agent);
      return {
        sessionId: view.id,
        version: chain.version,
        retained: retainedVersions(chain, agent?.mode === 'resident'),
        retention: agent?.retention ?? null,
        ...chainBytes(chain),
        rewinds: rewindsOf(chain),
      };
    },
  );
};
