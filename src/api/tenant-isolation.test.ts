/**
 * Tenant isolation for every route the API serves, walked from the app itself (Fastify's
 * route list, and the OpenAPI document the route table generates): tenant B's token
 * cannot read, change or learn the existence of tenant A's resources through any of them.
 *
 * Every route needs a case below, or the test fails naming it: a route added later is
 * covered only once someone says how it keeps tenants apart. The kinds:
 * - owned: B's calls aimed at A's resources answer exactly as the same calls aimed at
 *   resources that exist nowhere (404 *_NOT_FOUND, the API's convention), reveal nothing
 *   of A, and the owner's own call answers differently (so the probe aims at something);
 * - create: B makes something of its own; it works and answers nothing of A;
 * - list: B's answer shows B's own resources and nothing of A's (A's shows A's);
 * - shared: the same for every tenant and nothing tenant-specific (the workers);
 * - admin: 403 ADMIN_ONLY for a tenant;
 * - public: no token needed, nothing of any tenant in it; the only kind allowed outside
 *   the route table, whose wrapper is what checks tokens.
 * A `globalName` part covers what global names cannot hide: creating an agent or a
 * session with a name another tenant holds fails (ids are global: architecture.md,
 * *Not yet*), but reveals nothing more and changes nothing.
 * After all of B's calls, everything A sees through every GET route is unchanged.
 * Real SQLite, app.inject(); the event streams over real HTTP.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { FileBlobStore } from '../blobs/index.js';
import { loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore, type Store } from '../store/index.js';
import { WorkspaceHistory } from '../workspace/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/** The names of one tenant's resources, or of resources that exist nowhere (GHOST). */
interface Ids {
  agent: string;
  session: string;
  queued: string;
  schedule: string;
  webhook: string;
  delivery: string;
  prefix: string;
  sandbox: string;
  turn: string;
  text: string;
}

interface Probe {
  params?: Record<string, string>;
  query?: Record<string, string>;
  body?: object;
  /** An answer other than 404 *_NOT_FOUND, and why it tells B nothing of A. */
  answers?: { status: number; code: string; why: string };
}
/** Probes built from the target's ids (A's, or GHOST) and the caller's own (B's). */
type Probes = (target: Ids, own: Ids) => Probe[];

type RouteCase =
  | {
      kind: 'owned';
      probes: Probes;
      globalName?: GlobalName /** why the answer is 200 */;
      okForMissing?: string;
    }
  /** B makes something of its own: it works, and answers nothing of A. */
  | { kind: 'create'; probes: (own: Ids) => Probe[]; globalName?: GlobalName }
  | { kind: 'list' | 'shared' | 'admin' | 'public' }
  /** No token, but a platform's signature: unsigned, it is refused (or the channel looks absent) and shows nothing. */
  | { kind: 'signed' };
interface GlobalName {
  why: string;
  probes: Probes;
}

const owned = (probes: Probes, extra: Partial<Extract<RouteCase, { kind: 'owned' }>> = {}): RouteCase => ({
  kind: 'owned',
  probes,
  ...extra,
});
const id = (key: keyof Ids) => (t: Ids) => [{ params: { id: t[key] } }];
const agentName = (t: Ids) => [{ params: { name: t.agent } }];
const GLOBAL_SESSION_IDS =
  'session ids are global: a message or schedule to a free id creates the session, to a taken one fails';

const CASES: Record<string, RouteCase> = {
  'POST /v1/agents': {
    kind: 'create',
    probes: (own) => [{ body: { name: `${own.agent}-2`, provider: 'command' } }],
    globalName: {
      why: 'agent names are global: a taken name is AGENT_EXISTS whoever holds it',
      probes: (t) => [{ body: { name: t.agent, provider: 'command' } }],
    },
  },
  'GET /v1/agents': { kind: 'list' },
  'GET /v1/agents/:name': owned(agentName),
  'PUT /v1/agents/:name': {
    kind: 'create',
    probes: (own) => [
      { params: { name: `${own.agent}-3` }, body: { name: `${own.agent}-3`, provider: 'command' } },
    ],
    globalName: {
      why: 'agent names are global: applying a taken name is AGENT_EXISTS whoever holds it',
      probes: (t) => [{ params: { name: t.agent }, body: { name: t.agent, provider: 'command' } }],
    },
  },
  'PATCH /v1/agents/:name': owned((t) => [{ params: { name: t.agent }, body: { memoryMb: 64 } }]),
  'DELETE /v1/agents/:name': owned(agentName),
  'GET /v1/agents/:name/grants': owned(agentName),
  'POST /v1/agents/:name/grants': owned((t) => [
    { params: { name: t.agent }, body: { prefix: 'b/', ops: ['read'] } },
  ]),
  'DELETE /v1/agents/:name/grants': owned((t) => [
    { params: { name: t.agent }, query: { prefix: t.prefix } },
  ]),
  'GET /v1/agents/:name/storage': owned(agentName),
  'POST /v1/sessions': owned((t) => [{ body: { agent: t.agent } }], {
    globalName: {
      why: 'session ids are global: a taken id is SESSION_EXISTS whoever holds it',
      probes: (t, own) => [{ body: { id: t.session, agent: own.agent } }],
    },
  }),
  'GET /v1/sessions': { kind: 'list' },
  'GET /v1/sessions/:id': owned(id('session')),
  'DELETE /v1/sessions/:id': owned(id('session')),
  'POST /v1/sessions/:id/recycle': owned(id('session')),
  'POST /v1/sessions/:id/exec': owned((t) => [{ params: { id: t.session }, body: { command: 'id' } }]),
  'POST /v1/sessions/:id/resume': owned(id('session')),
  'GET /v1/sessions/:id/sandbox/files': owned((t) => [{ params: { id: t.session }, query: { path: '' } }]),
  'GET /v1/sessions/:id/sandbox/files/stat': owned((t) => [
    { params: { id: t.session }, query: { path: 'a' } },
  ]),
  'GET /v1/sessions/:id/sandbox/files/content': owned((t) => [
    { params: { id: t.session }, query: { path: 'a' } },
  ]),
  'PUT /v1/sessions/:id/sandbox/files/content': owned((t) => [
    { params: { id: t.session }, query: { path: 'a' }, body: { bytes: 'x' } },
  ]),
  'DELETE /v1/sessions/:id/sandbox/files': owned((t) => [
    { params: { id: t.session }, query: { path: 'a' } },
  ]),
  'POST /v1/sessions/:id/sandbox/files/mkdir': owned((t) => [
    { params: { id: t.session }, body: { path: 'd' } },
  ]),
  'POST /v1/sessions/:id/sandbox/files/rename': owned((t) => [
    { params: { id: t.session }, body: { from: 'a', to: 'b' } },
  ]),
  'POST /v1/sessions/:id/reset-workspace': owned(id('session')),
  'POST /v1/sessions/:id/fork': owned(
    (t) => [
      { params: { id: t.session }, body: { id: 'globex-fork' } },
      { params: { id: t.session }, body: { id: 'globex-fork', fromVersion: 0 } },
    ],
    {
      globalName: {
        why: 'session ids are global: a fork into a taken id is SESSION_EXISTS whoever holds it',
        probes: (t, own) => [{ params: { id: own.session }, body: { id: t.session } }],
      },
    },
  ),
  'POST /v1/sessions/:id/messages': owned(
    (t, own) => [
      {
        params: { id: own.session },
        body: { text: 'x', agent: t.agent },
        answers: {
          status: 409,
          code: 'SESSION_AGENT_MISMATCH',
          why: "B's own session belongs to B's agent, whichever agent B names",
        },
      },
      { params: { id: 'globex-fresh' }, body: { text: 'x', agent: t.agent } },
    ],
    {
      globalName: {
        why: GLOBAL_SESSION_IDS,
        probes: (t, own) => [
          { params: { id: t.session }, body: { text: 'x' } },
          { params: { id: t.session }, body: { text: 'x', agent: own.agent } },
        ],
      },
    },
  ),
  'GET /v1/sessions/:id/messages': owned(id('session')),
  // Message ids are global: B names A's first message (A's running one) and A's queued session.
  'DELETE /v1/sessions/:id/messages/:mid': owned((t) => [
    { params: { id: t.session, mid: '1' } },
    { params: { id: t.queued, mid: '1' } },
  ]),
  'POST /v1/sessions/:id/interrupt': owned(id('session')),
  'GET /v1/sessions/:id/turns': owned(id('session')),
  'GET /v1/sessions/:id/turns/:turn': owned((t) => [{ params: { id: t.session, turn: t.turn } }]),
  'GET /v1/sessions/:id/turns/:turn/diff': owned((t) => [{ params: { id: t.session, turn: t.turn } }]),
  'GET /v1/sessions/:id/turns/:turn/timeline': owned((t) => [{ params: { id: t.session, turn: t.turn } }]),
  'GET /v1/sessions/:id/files': owned((t) => [
    { params: { id: t.session } },
    { params: { id: t.session }, query: { version: '0', path: 'x' } },
  ]),
  'GET /v1/sessions/:id/workspace': owned(id('session')),
  'POST /v1/sessions/:id/rewind': owned((t) => [{ params: { id: t.session }, body: { toVersion: 0 } }]),
  'GET /v1/sessions/:id/events': owned(id('session')),
  'POST /v1/sessions/:id/schedules': owned(
    (t) => [{ params: { id: 'globex-fresh' }, body: { cron: '0 9 * * *', message: 'x', agent: t.agent } }],
    {
      globalName: {
        why: GLOBAL_SESSION_IDS,
        probes: (t, own) => [
          { params: { id: t.session }, body: { cron: '0 9 * * *', message: 'x' } },
          { params: { id: t.session }, body: { cron: '0 9 * * *', message: 'x', agent: own.agent } },
        ],
      },
    },
  ),
  'GET /v1/sessions/:id/schedules': owned(id('session'), {
    okForMissing: 'a schedule may name a session before it exists, so an unknown session lists none',
  }),
  'GET /v1/events': { kind: 'list' },
  'GET /v1/status': { kind: 'list' },
  'GET /v1/queue': { kind: 'list' },
  'GET /v1/sandboxes': { kind: 'list' },
  'GET /v1/workers': { kind: 'shared' },
  'GET /v1/schedules': { kind: 'list' },
  'POST /v1/schedules/:id/pause': owned(id('schedule')),
  'POST /v1/schedules/:id/resume': owned(id('schedule')),
  'POST /v1/schedules/:id/cancel': owned(id('schedule')),
  'POST /v1/webhooks': owned((t) => [
    { body: { url: 'http://127.0.0.1:9/b', agent: t.agent } },
    { body: { url: 'http://127.0.0.1:9/b', session: t.session } },
  ]),
  'GET /v1/webhooks': { kind: 'list' },
  'DELETE /v1/webhooks/:id': owned(id('webhook')),
  'GET /v1/webhooks/:id/deliveries': owned(id('webhook')),
  'POST /v1/webhooks/:id/deliveries/:delivery/retry': owned((t, own) => [
    { params: { id: t.webhook, delivery: t.delivery } },
    // B's own webhook with A's delivery: the delivery must be checked, not only the webhook.
    { params: { id: own.webhook, delivery: t.delivery } },
  ]),
  'POST /v1/tokens': { kind: 'admin' },
  'GET /v1/tokens': { kind: 'admin' },
  'DELETE /v1/tokens/:id': { kind: 'admin' },
  'GET /metrics': { kind: 'admin' },
  'GET /v1/chaos/reports': { kind: 'admin' },
  'POST /v1/workers/:id/drain': { kind: 'admin' },
  // A channel names a secret of the host's store as its bot token: the operator's alone.
  'POST /v1/channels': { kind: 'admin' },
  'GET /v1/channels': { kind: 'admin' },
  'POST /v1/channels/:id/pause': { kind: 'admin' },
  'POST /v1/channels/:id/resume': { kind: 'admin' },
  'DELETE /v1/channels/:id': { kind: 'admin' },
  'GET /v1/channels/:id/outbox': { kind: 'admin' },
  // Slack sends no berth token: the request's signature, with the channel's signing secret, is its check.
  'POST /v1/channels/:id/slack/events': { kind: 'signed' },
  // Nor does Telegram: the channel's secret_token in its header is the check.
  'POST /v1/channels/:id/telegram/updates': { kind: 'signed' },
  'GET /v1/openapi.json': { kind: 'public' },
  'GET /healthz': { kind: 'public' },
  'GET /': { kind: 'public' },
  'GET /dashboard/app.js': { kind: 'public' },
  'GET /dashboard/lib.js': { kind: 'public' },
  'GET /dashboard/session.js': { kind: 'public' },
  'GET /dashboard/channels.js': { kind: 'public' },
  'GET /dashboard/history.js': { kind: 'public' },
  'GET /dashboard/timeline.js': { kind: 'public' },
  'GET /dashboard/style.css': { kind: 'public' },
};

const GHOST: Ids = {
  agent: 'ghost-agent',
  session: 'ghost-s1',
  queued: 'ghost-s2',
  schedule: 'sch_ghost',
  webhook: 'wh_ghost',
  delivery: '999999',
  prefix: 'ghost/',
  sandbox: 'ghost-sandbox',
  turn: 't_ghost',
  text: 'ghost-text',
};

/** Every method and URL Fastify serves (HEAD aside: Fastify answers it with the GET handler), from its route tree. */
function servedRoutes(app: FastifyInstance): string[] {
  const served: string[] = [];
  const path: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    // "│   ├── /:name (GET, HEAD)": four columns per level of the tree, then the segment.
    const at = line.search(/[├└]── /);
    const node = /^(\S+)(?: \(([A-Z, ]+)\))?$/.exec(line.slice(at + 4));
    if (at < 0 || at % 4 !== 0 || !node) continue;
    path.length = at / 4;
    path.push(node[1]!);
    for (const method of (node[2] ?? '').split(', '))
      if (method !== '' && method !== 'HEAD') served.push(`${method} ${path.join('')}`);
  }
  return served;
}

async function setup(t: { after(fn: () => Promise<void>): void }) {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const blobsDir = await mkdtemp(join(tmpdir(), 'berth-tenants-'));
  const history = new WorkspaceHistory(new FileBlobStore(blobsDir));
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }), history });
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  t.after(async () => {
    await app.close();
    await store.close();
    await rm(blobsDir, { recursive: true, force: true });
  });
  const now = Date.now();
  const tokens = {
    acme: (await issueToken(store, 'acme', 'a', now)).token,
    globex: (await issueToken(store, 'globex', 'g', now)).token,
    admin: (await issueToken(store, null, 'admin', now)).token,
  };
  // Both running sessions first: a claim takes the oldest runnable session of any tenant.
  const a = await seed(store, 'acme', 1);
  const b = await seed(store, 'globex', 2);
  for (const ids of [a, b]) {
    const tenant = ids.agent.split('-')[0]!;
    await store.enqueueMessage({
      sessionId: ids.queued,
      agent: ids.agent,
      text: `${tenant}-queued-text`,
      now,
      tenant,
    });
  }
  return { app, store, url, tokens, a, b };
}

/** One tenant's resources, one of each kind, named after the tenant; a turn, a sandbox, a dead delivery. */
async function seed(store: Store, tenant: string, n: number): Promise<Ids> {
  const now = Date.now();
  const agent = `${tenant}-agent`;
  await store.createAgent({ name: agent, provider: 'command' } as never, now, tenant);
  const hook = await store.createWebhook(
    {
      id: `wh_${tenant}`,
      tenant,
      agent,
      sessionId: null,
      url: `http://127.0.0.1:9/${tenant}-hook`,
      secret: 's',
      events: ['queued'],
    },
    now,
  );
  const session = `${tenant}-s1`;
  const text = `${tenant}-secret-text`;
  await store.enqueueMessage({ sessionId: session, agent, text, now, tenant });
  // Workers are the operator's, shown to every tenant: named after nobody.
  const worker = `worker-${n}`;
  await store.registerWorker({ id: worker, host: 'h', pid: 1, slots: 1, heartbeatAt: now, startedAt: now });
  const claimed = await store.claimRunnableSession(worker, now);
  assert.equal(claimed?.session.id, session, 'each tenant claims its own first session');
  const fence = { sessionId: session, generation: claimed!.session.generation, workerId: worker };
  const sandbox = `${tenant}-sandbox`;
  await store.recordSandbox(fence, sandbox, now);
  // What its worker reports of the sandbox's lifecycle: /v1/sandboxes lists these records.
  await store.recordSandboxes(
    [
      {
        name: sandbox,
        workerId: worker,
        phase: 'bound',
        pooled: false,
        sessionId: session,
        generation: fence.generation,
        turnId: null,
        endReason: null,
        endMessage: null,
        createdAt: now,
        updatedAt: now,
        endedAt: null,
      },
    ],
    now,
  );
  const started = await store.startTurn(fence, now);
  const turn = (started as { value: { turn: { id: string } } }).value.turn.id;
  const taken = await store.takeWebhookDelivery(now, 60_000);
  assert.equal(taken?.webhook.id, hook.id);
  await store.recordWebhookAttempt(
    {
      deliveryId: taken!.delivery.id,
      attempt: taken!.delivery.attempts,
      statusCode: 500,
      error: 'down',
      durationMs: 1,
      decision: { action: 'dead' },
    },
    now,
  );
  const queued = `${tenant}-s2`;
  const schedule = await store.createSchedule(
    {
      sessionId: session,
      cron: '0 9 * * *',
      tz: 'UTC',
      message: `${tenant}-scheduled`,
      missed: 'once',
      nextRunAt: now + 3_600_000,
      tenant,
    },
    now,
  );
  const prefix = `${tenant}-photos/`;
  await store.grantStorage({ agent, prefix, ops: ['read'] }, now, tenant);
  return {
    agent,
    session,
    queued,
    schedule: schedule.id,
    webhook: hook.id,
    delivery: String(taken!.delivery.id),
    prefix,
    sandbox,
    turn,
    text,
  };
}

interface Answer {
  status: number;
  body: string;
}

/** What of A's (besides a delivery's number) an answer to B must never hold unless B sent it. */
function markersOf(a: Ids): string[] {
  const { delivery: _, ...named } = a;
  return [...Object.values(named), 'acme-hook', 'acme-scheduled', 'acme-queued-text'];
}

/** The answer with every id of A and of GHOST replaced by its kind: equal answers then mean "looks absent". */
function normalized(answer: Answer, a: Ids): string {
  let body = answer.body;
  for (const ids of [a, GHOST])
    for (const [key, value] of Object.entries(ids).sort((x, y) => y[1].length - x[1].length))
      body = body.replace(
        new RegExp(`\\b${value.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\b`, 'g'),
        `<${key}>`,
      );
  return `${answer.status} ${body}`;
}

test('tenant B reaches nothing of tenant A through any route the API serves', async (t) => {
  const { app, store, url, tokens, a, b } = await setup(t);

  // The routes: what Fastify serves, and the route table's (its OpenAPI document).
  const doc = (await app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as {
    paths: Record<string, Record<string, { responses: unknown }>>;
  };
  const table = new Map<string, { stream: boolean }>();
  for (const [path, methods] of Object.entries(doc.paths))
    for (const [method, op] of Object.entries(methods))
      table.set(`${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`, {
        stream: JSON.stringify(op.responses).includes('text/event-stream'),
      });
  const served = servedRoutes(app);
  assert.ok(served.length > table.size, `the route tree was read: ${served.join(', ')}`);
  assert.deepEqual(
    [...table.keys()].filter((r) => !served.includes(r)),
    [],
    'the table lists only served routes',
  );
  assert.deepEqual(
    served.filter((r) => !CASES[r]),
    [],
    'routes with no isolation case: say in CASES how each keeps tenants apart',
  );
  assert.deepEqual(
    Object.keys(CASES).filter((r) => !served.includes(r)),
    [],
    'cases for routes the API does not serve',
  );
  assert.deepEqual(
    served.filter((r) => !table.has(r) && CASES[r]!.kind !== 'public'),
    [],
    'a route outside the route table checks no token: only public ones may be there',
  );

  const call = async (
    token: string | null,
    route: string,
    probe: Probe,
    until?: string[],
  ): Promise<Answer> => {
    const [method, pattern] = route.split(' ') as [Method, string];
    const path = pattern.replace(/:(\w+)/g, (_, key: string) =>
      encodeURIComponent(probe.params?.[key] ?? 'x'),
    );
    const target = probe.query ? `${path}?${new URLSearchParams(probe.query)}` : path;
    const headers: Record<string, string> = token ? { authorization: `Bearer ${token}` } : {};
    if (!table.get(route)?.stream) {
      const res = await app.inject({
        method,
        url: target,
        headers,
        ...(probe.body ? { payload: probe.body } : {}),
      });
      return { status: res.statusCode, body: res.body };
    }
    // A stream never ends: read it until one of `until` shows (or 3 s), then hang up.
    const abort = new AbortController();
    const res = await fetch(`${url}${target}`, { headers, signal: abort.signal });
    let body = '';
    const reader = res.body!.getReader();
    const deadline = setTimeout(() => abort.abort(), 3_000);
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        body += Buffer.from(value).toString('utf8');
        if (res.status === 200 && until?.some((m) => body.includes(m))) break;
      }
    } catch (err) {
      if ((err as Error).name !== 'AbortError') throw err;
    } finally {
      clearTimeout(deadline);
      abort.abort();
    }
    return { status: res.status, body };
  };
  const markers = markersOf(a);
  const leaked = (answer: Answer, probe: Probe) => {
    const sent = JSON.stringify(probe);
    return markers.filter((m) => answer.body.includes(m) && !sent.includes(m));
  };
  const mentionsAny = (answer: Answer, ids: Ids) => markersOf(ids).some((m) => answer.body.includes(m));
  const code = (answer: Answer) => {
    try {
      return (JSON.parse(answer.body) as { error?: { code?: string } }).error?.code;
    } catch {
      return undefined;
    }
  };

  /** Everything A sees through every GET route, and A's events. */
  const viewOfA = async () => {
    const view: Record<string, Answer> = {};
    for (const route of served) {
      const c = CASES[route]!;
      if (!route.startsWith('GET ') || table.get(route)?.stream) continue;
      if (c.kind === 'owned') view[route] = await call(tokens.acme, route, c.probes(a, a)[0]!);
      else if (c.kind === 'list' || c.kind === 'shared') view[route] = await call(tokens.acme, route, {});
    }
    return { view, events: await store.eventsAfter(null, 0, 1000, 'acme') };
  };
  const before = await viewOfA();

  const problems: string[] = [];
  const ownerChecks: { route: string; probe: Probe; seenByB: Answer }[] = [];
  for (const route of served) {
    const c = CASES[route]!;
    if (c.kind === 'signed') {
      const unsigned = await call(null, route, {});
      if (unsigned.status !== 401 && unsigned.status !== 404)
        problems.push(`${route} unsigned: ${unsigned.status} ${unsigned.body.slice(0, 200)}`);
      if (leaked(unsigned, {}).length > 0)
        problems.push(`${route}: the unsigned see ${leaked(unsigned, {}).join(', ')}`);
    } else if (c.kind !== 'public') {
      const anonymous = await call(null, route, {});
      if (anonymous.status !== 401 || code(anonymous) !== 'API_TOKEN_INVALID')
        problems.push(`${route} without a token: ${anonymous.status} ${anonymous.body.slice(0, 200)}`);
    }
    if (c.kind === 'owned') {
      const aimedAtA = c.probes(a, b);
      const aimedAtNothing = c.probes(GHOST, b);
      for (const [i, probe] of aimedAtA.entries()) {
        const got = await call(tokens.globex, route, probe, markersOf(b));
        const missing = await call(tokens.globex, route, aimedAtNothing[i]!, markersOf(b));
        if (normalized(got, a) !== normalized(missing, a))
          problems.push(
            `${route} ${JSON.stringify(probe)}: A's answers ${got.status} ${got.body.slice(0, 200)}, a missing one ${missing.status} ${missing.body.slice(0, 200)}`,
          );
        const expected: { status: number; code?: string } =
          probe.answers ?? (c.okForMissing ? { status: 200 } : { status: 404, code: '_NOT_FOUND' });
        if (got.status !== expected.status || (expected.code && !code(got)?.endsWith(expected.code)))
          problems.push(
            `${route} ${JSON.stringify(probe)}: ${got.status} ${got.body.slice(0, 200)} (expected ${JSON.stringify(expected)})`,
          );
        if (leaked(got, probe).length > 0)
          problems.push(`${route}: B learnt ${leaked(got, probe).join(', ')}`);
        ownerChecks.push({ route, probe: c.probes(a, a)[i]!, seenByB: got });
      }
    }
    if (c.kind === 'create') {
      for (const probe of c.probes(b)) {
        const got = await call(tokens.globex, route, probe);
        if (got.status >= 300)
          problems.push(`${route} ${JSON.stringify(probe)} for B's own: ${got.status} ${got.body}`);
        if (leaked(got, probe).length > 0)
          problems.push(`${route}: B learnt ${leaked(got, probe).join(', ')}`);
      }
    }
    if ((c.kind === 'owned' || c.kind === 'create') && c.globalName) {
      for (const probe of c.globalName.probes(a, b)) {
        const got = await call(tokens.globex, route, probe);
        if (got.status < 400)
          problems.push(`${route} ${JSON.stringify(probe)} took A's name: ${got.status} ${got.body}`);
        if (leaked(got, probe).length > 0)
          problems.push(`${route}: B learnt ${leaked(got, probe).join(', ')}`);
      }
    }
    if (c.kind === 'list' || c.kind === 'shared') {
      const seenByB = await call(tokens.globex, route, {}, markersOf(b));
      const seenByA = await call(tokens.acme, route, {}, markersOf(a));
      if (seenByB.status !== 200) problems.push(`${route}: ${seenByB.status} ${seenByB.body.slice(0, 200)}`);
      if (leaked(seenByB, {}).length > 0) problems.push(`${route}: B sees ${leaked(seenByB, {}).join(', ')}`);
      if (c.kind === 'list' && !(mentionsAny(seenByB, b) && mentionsAny(seenByA, a)))
        problems.push(`${route}: a tenant's listing does not show its own resources, so it proves nothing`);
      if (c.kind === 'shared' && seenByA.body !== seenByB.body)
        problems.push(`${route}: shared, yet A and B are answered differently`);
    }
    if (c.kind === 'admin') {
      const got = await call(tokens.globex, route, {});
      if (got.status !== 403 || code(got) !== 'ADMIN_ONLY')
        problems.push(`${route} as a tenant: ${got.status} ${got.body.slice(0, 200)}`);
      const operator = await call(tokens.admin, route, { body: { tenant: 'initech' } });
      if (operator.status === 403)
        problems.push(`${route}: the operator is refused too, so the check proves nothing`);
    }
    if (c.kind === 'public') {
      const got = await call(null, route, {});
      if (got.status !== 200) problems.push(`${route} without a token: ${got.status}`);
      if (leaked(got, {}).length > 0)
        problems.push(`${route}: the public sees ${leaked(got, {}).join(', ')}`);
    }
  }
  assert.deepEqual(problems, []);
  assert.deepEqual(await viewOfA(), before, "nothing of A's changed");

  // Each probe aimed at something: A's own call, the same one, is answered differently.
  const rank: Record<string, number> = { GET: 0, POST: 1, PUT: 2, PATCH: 3, DELETE: 4 };
  ownerChecks.sort((x, y) => rank[x.route.split(' ')[0]!]! - rank[y.route.split(' ')[0]!]!);
  for (const { route, probe, seenByB } of ownerChecks) {
    const seenByA = await call(tokens.acme, route, probe, markersOf(a));
    assert.notEqual(
      normalized(seenByA, a),
      normalized(seenByB, a),
      `${route} ${JSON.stringify(probe)} aims at nothing of A`,
    );
  }
});
