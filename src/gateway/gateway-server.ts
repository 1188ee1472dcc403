/**
 * One gateway per sandbox: an HTTP/1.1 server on a Unix socket that only that sandbox
 * can reach. It is the sandbox's only door. It listens before the sandbox starts; the
 * runner's first call, GET /v1/bind (with the boot token from its run dir), waits until
 * the worker binds the gateway to a session, then returns the session token. A warm
 * sandbox waits there unbound; a cold one finds its binding at once. After the bind every
 * request must carry the sandbox token for that binding (session, generation); every
 * write goes to the store fenced by that generation and this worker's lease, so a stale
 * sandbox gets 409, an audit row, and nothing written. The turn the runner works on is the
 * sandbox lifecycle's turn in flight (core/sandbox-lifecycle.ts): the gateway hands it
 * over, holds the state it puts, and writes that state in the turn's commit transaction,
 * so a killed turn's state vanishes with it.
 */

import { timingSafeEqual } from 'node:crypto';
import { chmod, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { z } from 'zod';
import {
  BerthError,
  type BindAssignment,
  CHECKPOINT_PATH,
  type CheckpointTaken,
  type Clock,
  type CommitInput,
  type ErrorCode,
  MODEL_PROXY_PATH,
  type SandboxLifecycle,
  type SandboxUsage,
  STORAGE_PATH,
  type TurnInFlight,
  type TurnOutcome,
  type TurnOutput,
} from '../core/index.js';
import { type CommitCode, type Fence, fenceError, type GatewayStore } from '../store/index.js';
import { type EgressPolicy, EgressProxy } from './egress-proxy.js';
import { ExecRelay } from './exec-relay.js';
import { readJson, sendJson } from './http-json.js';
import { LongPoll } from './long-poll.js';
import type { ModelProxy } from './model-proxy.js';
import { SandboxAudit } from './sandbox-audit.js';
import {
  abortBody,
  checkpointBody,
  commitBody,
  heartbeatBody,
  progressBody,
  STATE_KEY,
  stateBody,
} from './schemas.js';
import type { StorageRoutes } from './storage-routes.js';
import { verifySandboxToken } from './token.js';
import { planTurnSchedule, type SchedulePolicy, turnScheduleBody } from './turn-schedules.js';

export interface GatewayHooks {
  onHeartbeat(now: number, usage?: SandboxUsage): void;
  /**
   * Seals the turn's workspace layer (and uploads it); a failure aborts the turn instead of
   * committing it. Returns what the commit must carry of the workspace.
   */
  beforeCommit(turnId: string): Promise<CommitInput['workspace']>;
  /**
   * Records a checkpoint of the turn's work (its files so far) and returns once it is
   * durable; CHECKPOINT_FAILED when it is not (nothing of it is used). The turn goes on.
   */
  checkpoint(turnId: string, label: string): Promise<CheckpointTaken>;
  /** The same at a model call, before the model proxy forwards it: null when nothing was recorded. */
  checkpointModelCall(turnId: string): Promise<CheckpointTaken | null>;
}

export interface GatewayOptions {
  /** The sandbox this gateway is the door of: its phase and its turn in flight. */
  lifecycle: SandboxLifecycle;
  socketPath: string;
  /** What the runner proves it is this sandbox with, before any binding exists. */
  bootToken: string;
  secret: Buffer;
  store: GatewayStore;
  clock: Clock;
  log: Logger;
  /** The runner is booted and waiting for its binding (a warm sandbox is ready). */
  onBootWaiting?(): void;
  /** Largest request body accepted, in bytes. */
  maxBodyBytes: number;
  /** How long GET /v1/turn holds the request before answering 204. @default 25000 */
  longPollMs?: number;
}

/** A session binding: given once, for the life of the sandbox. */
export interface GatewayBinding {
  fence: Fence;
  /** The session token handed to the runner; requests carrying any other are refused. */
  assignment: BindAssignment;
  hooks: GatewayHooks;
  log: Logger;
  /** Serves /v1/model/* for model agents; absent = no model proxy. */
  modelProxy?: ModelProxy;
  /** Serves /v1/storage: the agent's mediated storage; absent = no storage route. */
  storage?: StorageRoutes;
  /** The agent's egress allowlist, served as HTTP CONNECT on this socket. @default deny all */
  egress?: EgressPolicy;
  /** The agent's schedule_message tool (POST /v1/schedules) and its cap. @default no schedules */
  schedules?: SchedulePolicy;
}

export class SandboxGateway {
  private readonly server: Server;
  /** HTTP CONNECT on this socket, with the bound agent's allowlist; none before the bind (CONNECT is refused). */
  private egress: EgressProxy | null = null;
  private readonly turnPoll: LongPoll;
  private readonly bindPoll: LongPoll;
  /** The doors of the session this sandbox serves, given once (which session, and its phase, are the lifecycle's). */
  private binding: GatewayBinding | null = null;
  private readonly audit: SandboxAudit;
  private readonly unsubscribe: () => void;
  /** Commands run in this sandbox through its runner, outside any turn (exec-relay.ts). */
  readonly exec: ExecRelay;

  constructor(private readonly o: GatewayOptions) {
    this.turnPoll = new LongPoll(o.longPollMs ?? 25_000);
    // Whether the runner waits for its binding is the lifecycle's: a warm sandbox is ready while it does.
    this.bindPoll = new LongPoll(o.longPollMs ?? 25_000, (waiting) =>
      o.lifecycle.runnerWaitsForBind(waiting),
    );
    this.audit = new SandboxAudit(o.store, o.clock);
    this.exec = new ExecRelay(o.longPollMs ?? 25_000);
    this.server = createServer((req, res) => {
      this.handle(req, res).catch((err: unknown) => this.fail(res, err));
    });
    this.server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
      this.handleConnect(req, socket, head).catch((err: unknown) => this.failRaw(socket, err));
    });
    this.server.keepAliveTimeout = 60_000;
    // A turn handed to the lifecycle goes to the runner's waiting long-poll at once.
    this.unsubscribe = o.lifecycle.onChange(() => {
      if (this.offeredTurn && this.turnPoll.waiting) this.deliverTurn(this.turnPoll.take()!);
      // A command's stream ends when its sandbox begins to end, not when it is gone.
      const ending = o.lifecycle.ending;
      if (ending) this.exec.end(ending);
    });
  }

  async listen(): Promise<void> {
    await rm(this.o.socketPath, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.o.socketPath, () => resolve());
    });
    // The sandbox user is not root; the directory holding the socket is visible to that sandbox alone.
    await chmod(this.o.socketPath, 0o666);
  }

  /** Binds the sandbox to one session; answers the runner's waiting GET /v1/bind now. Once only. */
  bind(binding: GatewayBinding): void {
    if (this.binding) throw new Error('gateway already bound: a sandbox serves one session');
    this.binding = binding;
    this.egress = new EgressProxy(binding.egress ?? { agent: '', rules: [] }, (entry) =>
      this.audit.egress(this.fence, binding.egress?.agent ?? '', entry, this.log),
    );
    const waiting = this.bindPoll.take();
    if (waiting) this.send(waiting, 200, binding.assignment);
  }

  private get fence(): Fence {
    return this.binding!.fence;
  }

  private get hooks(): GatewayHooks {
    return this.binding!.hooks;
  }

  private get log(): Logger {
    return this.binding?.log ?? this.o.log;
  }

  /** The lifecycle's turn in flight. */
  private get turn(): TurnInFlight | null {
    return this.o.lifecycle.turn;
  }

  /** A turn handed over by the worker that the runner has not received yet. */
  private get offeredTurn(): TurnInFlight | null {
    return this.o.lifecycle.offeredTurn;
  }

  async close(): Promise<void> {
    this.unsubscribe();
    this.exec.end(this.o.lifecycle.ending ?? { reason: 'SandboxExited', message: 'its gateway closed' });
    this.turnPoll.release();
    this.bindPoll.release();
    this.egress?.closeAll();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await rm(this.o.socketPath, { force: true });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const now = this.o.clock.now();
    const presented = (req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    if (req.method === 'GET' && req.url === '/v1/bind') return this.longPollBind(req, res, presented);
    await this.authorize(req, now);
    const binding = this.fence;
    const path = (req.url ?? '').split('?')[0]!;
    const modelProxy = this.binding?.modelProxy;
    if (path.startsWith(`${MODEL_PROXY_PATH}/`) && modelProxy) {
      const open = this.turn?.open ? this.turn.row : null;
      return modelProxy.handle(req, res, req.url ?? '', open);
    }
    const storage = this.binding?.storage;
    if ((path === STORAGE_PATH || path.startsWith(`${STORAGE_PATH}/`)) && storage)
      return storage.handle(req, res, req.url ?? '');
    const stateKey = /^\/v1\/state\/([^/]+)$/.exec(path)?.[1];
    if (stateKey !== undefined) return this.handleState(req, res, decodeURIComponent(stateKey));
    const route = `${req.method} ${path}`;
    if (path.startsWith('/v1/exec') && (await this.exec.handle(req, res, route, (s) => this.body(req, s))))
      return;
    switch (route) {
      case 'GET /v1/turn':
        return this.longPollTurn(req, res);
      case 'POST /v1/heartbeat': {
        const { usage } = await this.body(req, heartbeatBody);
        this.hooks.onHeartbeat(now, usage);
        return this.send(res, 200, { ok: true });
      }
      case 'POST /v1/progress': {
        const body = await this.body(req, progressBody);
        await this.fenced(
          'recordProgress',
          await this.o.store.recordProgress({ ...binding, ...body }, now),
          now,
        );
        return this.send(res, 200, { ok: true });
      }
      case 'POST /v1/commit': {
        const body = await this.body(req, commitBody);
        assertRepliesOfTurn(body.outputs, this.turn?.assignment.messages ?? []);
        const turn = this.closeTurn(body.turnId, 'commitTurn');
        const { state, schedules } = turn;
        let workspace: CommitInput['workspace'];
        try {
          workspace = await this.hooks.beforeCommit(body.turnId);
        } catch (err) {
          // Its code decides: a terminal seal failure (over the workspace quota) would fail again, so no retry.
          const code = err instanceof BerthError ? err.code : 'WORKSPACE_FAILED';
          await this.abortClosed(turn, code, (err as Error).message, now);
          throw err;
        }
        const committed = await this.o.store.commitTurn(
          {
            ...binding,
            ...body,
            state,
            ...(schedules.length > 0 ? { schedules: { ...this.binding!.schedules!, items: schedules } } : {}),
            ...(workspace ? { workspace } : {}),
          },
          now,
        );
        if (committed === 'workspace_behind' || committed === 'interrupted') {
          // Nothing was written: the turn worked on an old copy (its retry gets one brought level
          // with the store), or its user interrupted it first (its abort ends it interrupted).
          const refused = fenceError(committed, this.fence, 'commitTurn');
          await this.abortClosed(turn, refused.code, refused.message, now);
          throw refused;
        }
        await this.fenced('commitTurn', committed, now);
        this.settle(turn, { kind: 'committed' });
        return this.send(res, 200, { ok: true });
      }
      case `POST ${CHECKPOINT_PATH}`: {
        const { label } = await this.body(req, checkpointBody);
        const turn = this.openTurn('a checkpoint');
        return this.send(res, 200, await this.hooks.checkpoint(turn.id, label));
      }
      case 'POST /v1/schedules': {
        const turn = this.openTurn('a schedule');
        const policy = this.binding?.schedules ?? { agent: '', cap: 0 };
        const body = await this.body(req, turnScheduleBody);
        turn.schedules.push(await planTurnSchedule(body, turn.schedules, policy, this.o.store, now));
        return this.send(res, 200, { nextRunAt: turn.schedules.at(-1)!.nextRunAt, heldUntilCommit: true });
      }
      case 'GET /v1/schedules': {
        const committed = await this.o.store.listSchedules(binding.sessionId);
        return this.send(res, 200, { schedules: committed, heldUntilCommit: this.turn?.schedules ?? [] });
      }
      case 'POST /v1/abort': {
        const body = await this.body(req, abortBody);
        const turn = this.closeTurn(body.turnId, 'abortTurn');
        // A limit the runner reports is a terminal catalogue code: the turn fails for good (the sandbox can only fail its own turn).
        const code: ErrorCode = body.code ?? 'TURN_FAILED';
        const error = body.error;
        const abort = { ...binding, turnId: body.turnId, code, error };
        await this.fenced('abortTurn', await this.o.store.abortTurn(abort, now), now);
        this.settle(turn, { kind: 'aborted', code, error });
        return this.send(res, 200, { ok: true });
      }
      default:
        throw new BerthError('NOT_FOUND', `No gateway route ${route}`);
    }
  }

  /** The sandbox token for this binding: 401 (audited) for any other, 409 (audited) for another generation. */
  private async authorize(req: IncomingMessage, now: number): Promise<void> {
    const presented = (req.headers.authorization ?? '').replace(/^Bearer\s+/i, '');
    if (!this.binding) {
      await this.audit.unauthorized(null, `${req.method} ${req.url}`, null, now, this.log);
      throw new BerthError(
        'UNAUTHORIZED',
        `Sandbox is not bound to a session yet (${req.method} ${req.url})`,
      );
    }
    const claims = verifySandboxToken(this.o.secret, presented, now);
    const binding = this.binding.fence;
    if (!claims || claims.sessionId !== binding.sessionId) {
      await this.audit.unauthorized(
        binding,
        `${req.method} ${req.url}`,
        claims?.sessionId ?? null,
        now,
        this.log,
      );
      throw new BerthError(
        'UNAUTHORIZED',
        `No valid sandbox token for session ${binding.sessionId} (${req.method} ${req.url})`,
      );
    }
    if (claims.generation !== binding.generation) {
      await this.audit.staleGeneration(binding, `${req.method} ${req.url}`, claims.generation, now, this.log);
      throw new BerthError(
        'STALE_GENERATION',
        `Session ${binding.sessionId} generation ${claims.generation} is not current (${req.method} ${req.url})`,
      );
    }
  }

  /** CONNECT host:port — the egress proxy, behind the same token and generation checks as every route. */
  private async handleConnect(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    await this.authorize(req, this.o.clock.now());
    await this.egress!.connect(req.url ?? '', socket, head);
  }

  /** What a failed request or CONNECT answers: a catalogue error as is, anything else INTERNAL (logged). */
  private asBerthError(err: unknown, logMessage: string): BerthError {
    const error =
      err instanceof BerthError
        ? err
        : new BerthError('INTERNAL', `Gateway failed: ${(err as Error).message}`, { cause: err });
    if (error.code === 'INTERNAL') this.log.error({ err }, logMessage);
    return error;
  }

  /** An error on a CONNECT: the socket is raw, so the HTTP answer is written by hand. */
  private failRaw(socket: Duplex, err: unknown): void {
    const error = this.asBerthError(err, 'Gateway CONNECT failed');
    const text = JSON.stringify(error.toJSON());
    socket.end(
      `HTTP/1.1 ${error.status} ${error.code}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
    );
  }

  /** Claims the right to end the offered turn, once, before anything is sealed; returns what it wrote. */
  private closeTurn(turnId: string, operation: string): TurnInFlight {
    const turn = this.turn;
    if (!turn)
      throw new BerthError(
        'TURN_ENDED',
        `Turn ${turnId} of session ${this.fence.sessionId} is not open (${operation})`,
      );
    turn.close(turnId, operation);
    return turn;
  }

  /** Aborts a turn whose end the gateway claimed (closeTurn) but could not commit. */
  private async abortClosed(turn: TurnInFlight, code: ErrorCode, error: string, now: number): Promise<void> {
    await this.fenced(
      'abortTurn',
      await this.o.store.abortTurn({ ...this.fence, turnId: turn.id, code, error }, now),
      now,
    );
    this.settle(turn, { kind: 'aborted', code, error });
  }

  /** The turn's end is in the store: the supervisor hears of it through the lifecycle. */
  private settle(turn: TurnInFlight, outcome: TurnOutcome): void {
    this.o.lifecycle.settleTurn(turn, outcome);
  }

  /** GET reads the turn's own writes over committed state; PUT holds a value for the turn's commit (null deletes). */
  private async handleState(req: IncomingMessage, res: ServerResponse, key: string): Promise<void> {
    if (!STATE_KEY.test(key))
      throw new BerthError('INVALID_INPUT', `State key ${JSON.stringify(key.slice(0, 80))} is not allowed`);
    if (req.method === 'PUT') {
      const turn = this.openTurn('state');
      const { value } = await this.body(req, stateBody);
      turn.putState(key, value);
      return this.send(res, 200, { ok: true });
    }
    if (req.method !== 'GET')
      throw new BerthError('NOT_FOUND', `No gateway route ${req.method} /v1/state/:key`);
    const turn = this.turn;
    const value =
      turn && key in turn.state ? turn.state[key] : (await this.o.store.getState(this.fence.sessionId))[key];
    if (value === undefined || value === null)
      throw new BerthError('NOT_FOUND', `State key ${key} is not set`);
    return this.send(res, 200, { key, value });
  }

  /** The turn a sandbox write joins: it must be open (its commit or abort not begun). */
  private openTurn(what: string): TurnInFlight {
    if (!this.turn)
      throw new BerthError(
        'TURN_NOT_FOUND',
        `Session ${this.fence.sessionId} has no turn to write ${what} in`,
      );
    this.turn.assertOpen(what);
    return this.turn;
  }

  private longPollTurn(req: IncomingMessage, res: ServerResponse): void {
    if (this.offeredTurn) {
      this.deliverTurn(res);
      return;
    }
    this.turnPoll.hold(req, res);
  }

  private deliverTurn(res: ServerResponse): void {
    const turn = this.offeredTurn!;
    this.o.lifecycle.handOver(turn);
    this.send(res, 200, turn.assignment);
  }

  /** The runner's first call: its session token once bound (at once for a cold sandbox). */
  private async longPollBind(req: IncomingMessage, res: ServerResponse, presented: string): Promise<void> {
    if (!sameSecret(presented, this.o.bootToken)) {
      await this.audit.unauthorized(
        this.binding?.fence ?? null,
        'GET /v1/bind',
        null,
        this.o.clock.now(),
        this.log,
      );
      throw new BerthError('UNAUTHORIZED', 'GET /v1/bind needs the boot token of this sandbox');
    }
    if (this.binding) {
      this.send(res, 200, this.binding.assignment);
      return;
    }
    this.bindPoll.hold(req, res);
    this.o.onBootWaiting?.();
  }

  private async fenced(operation: string, code: CommitCode, now: number): Promise<void> {
    if (code === 'ok') return;
    if (code === 'stale')
      await this.audit.staleGeneration(this.fence, operation, this.fence.generation, now, this.log);
    throw fenceError(code, this.fence, operation);
  }

  private async body<T extends z.ZodTypeAny>(req: IncomingMessage, schema: T): Promise<z.output<T>> {
    const parsed = schema.safeParse(await readJson(req, this.o.maxBodyBytes, 'Gateway'));
    if (!parsed.success) {
      const issue = parsed.error.issues[0]!;
      throw new BerthError(
        'INVALID_INPUT',
        `Gateway request field ${issue.path.join('.') || '(body)'}: ${issue.message}`,
      );
    }
    return parsed.data;
  }

  private fail(res: ServerResponse, err: unknown): void {
    const error = this.asBerthError(err, 'Gateway request failed');
    // The SDKs retry 409 and 429 on their own; the gateway's refusals are final for that call.
    const shouldRetry = error.code === 'MODEL_UPSTREAM_FAILED' ? 'true' : 'false';
    if (!res.headersSent) this.send(res, error.status, error.toJSON(), { 'x-should-retry': shouldRetry });
  }

  private send(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    sendJson(res, status, body, headers);
  }
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** An output may answer only messages of its own turn: anything else would answer a message it never saw. */
function assertRepliesOfTurn(outputs: TurnOutput[], messages: { id: number }[]): void {
  const ofTurn = new Set(messages.map((m) => m.id));
  for (const [index, output] of outputs.entries()) {
    const foreign = output.inReplyTo?.find((id) => !ofTurn.has(id));
    if (foreign !== undefined)
      throw new BerthError(
        'INVALID_INPUT',
        `Output ${index} answers message ${foreign}, which is not a message of this turn (${[...ofTurn].join(', ')}); name only the turn's messages in inReplyTo, or leave it out to answer them all`,
      );
  }
}
