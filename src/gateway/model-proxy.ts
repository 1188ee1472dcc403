/**
 * The gateway's model proxy, `/v1/model/anthropic/…` and `/v1/model/openai/…`.
 * The sandbox talks to it as if it were the provider — an official SDK (berth's own model
 * loops) or a harness through the runner's model endpoint — using its sandbox token as the
 * "API key"; the proxy forwards the call to the upstream base URL with the real key from
 * the host's secret store, so no key ever enters a sandbox.
 *
 * Invariants:
 * - Only the model API of the agent's provider (a harness's: claude-code and opencode speak
 *   Anthropic's, codex OpenAI's) and only its generation calls pass (Anthropic `POST
 *   /v1/messages`, OpenAI `POST /chat/completions` and `POST /responses`), only inside an
 *   open turn, only with the agent's model: the key cannot be used for anything else.
 * - Request headers are rebuilt from an allowlist: the sandbox token never goes upstream.
 * - The response streams through as it arrives (SSE or JSON); its token usage is read on
 *   the way and recorded in the store when it ends, tokens spent by a turn that later
 *   aborts included.
 * - The agent's hourly budget is checked before every call (MODEL_BUDGET_EXCEEDED, 429,
 *   audited). A stale generation never reaches this module: the gateway refuses it first.
 * - A generation request is a model-call boundary (the loop waits; its tools have
 *   returned): where the binding gives a checkpoint (every model agent), the turn is
 *   checkpointed there, durable before anything goes upstream or is answered. A checkpoint
 *   that fails is skipped (the request still goes); a stale one stops it.
 * - Each completed answer (status < 400, its body whole) is journalled for the turn's work,
 *   keyed by a hash of the call and its request body. A retry that repeats the request is
 *   answered from the journal, the same bytes, without an upstream call, usage or budget:
 *   each call is paid and counted once. An answer the journal misses (a kill between its
 *   last byte and its record) is paid again: at most one call per fault.
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { request } from 'undici';
import {
  type Agent,
  BerthError,
  BUDGET_WINDOW_MS,
  type Clock,
  decideModelBudget,
  failpoint,
  isBerthError,
  type JournalledResponse,
  MODEL_PROXY_PATH,
  type ModelProviderName,
  modelApiOf,
  type Turn,
} from '../core/index.js';
import type { Fence, GatewayStore } from '../store/index.js';
import { readJson } from './http-json.js';
import { UsageMeter } from './usage-meter.js';

/** The calls each model API may make through the proxy. */
const ALLOWED_CALLS: Record<ModelProviderName, readonly string[]> = {
  anthropic: ['POST /v1/messages'],
  openai: ['POST /chat/completions', 'POST /responses'],
};
/** Request headers passed upstream; everything else (the sandbox token first) is dropped. */
const REQUEST_HEADERS = ['accept', 'anthropic-version', 'anthropic-beta', 'openai-beta', 'user-agent'];
/** Response headers passed back: what the SDKs read for errors, rate limits and retries. */
const RESPONSE_HEADER =
  /^(content-type|retry-after|retry-after-ms|x-should-retry|request-id|x-request-id|anthropic-ratelimit-.*|x-ratelimit-.*)$/;
const MAX_REQUEST_BYTES = 32 * 1024 * 1024;
/** A larger answer is not journalled (a retry pays it again): the journal lives in store rows. */
const MAX_JOURNAL_BYTES = 8 * 1024 * 1024;

export interface SecretSource {
  get(name: string): Promise<string | undefined>;
}

export interface ModelProxyOptions {
  agent: Agent;
  binding: Fence;
  secrets: SecretSource;
  /** Host-wide upstreams (ANTHROPIC_BASE_URL, OPENAI_BASE_URL); the agent's baseUrl wins. */
  upstreams: Record<ModelProviderName, string>;
  store: GatewayStore;
  clock: Clock;
  log: Logger;
  /**
   * Checkpoints the turn at a model call, durable when it resolves (nothing changed since
   * the previous one: nothing recorded). Absent: no checkpoints (a sandbox writing in place).
   */
  checkpoint?: (turnId: string) => Promise<unknown>;
}

export class ModelProxy {
  constructor(private readonly o: ModelProxyOptions) {}

  /** `url` is the request's path and query; `turn` the open turn, null when none is. */
  async handle(req: IncomingMessage, res: ServerResponse, url: string, turn: Turn | null): Promise<void> {
    const { agent, binding } = this.o;
    const [path = '', query = ''] = url.split('?', 2) as [string, string?];
    const [, provider = '', ...rest] = path.slice(MODEL_PROXY_PATH.length).split('/');
    const call = `${req.method} /${rest.join('/')}`;
    const api = modelApiOf(agent.provider);
    if (!api || provider !== api || !ALLOWED_CALLS[api].includes(call)) {
      throw new BerthError(
        'NOT_FOUND',
        `Agent ${agent.name} (provider ${agent.provider}) may not call ${call} on model proxy ${provider || '(none)'}`,
        {
          hint: api
            ? `The model proxy serves ${ALLOWED_CALLS[api].join(', ')} under ${MODEL_PROXY_PATH}/${api} for this agent.`
            : 'This agent calls no model.',
        },
      );
    }
    const name = provider as ModelProviderName;
    if (!turn)
      throw new BerthError(
        'TURN_NOT_FOUND',
        `Session ${binding.sessionId} has no open turn to call the model in`,
      );
    const turnId = turn.id;
    const body = await this.requestBody(req, call);
    await this.checkpoint(turnId);
    const journal = {
      messageId: Math.min(...turn.messageIds),
      requestHash: createHash('sha256').update(`${call}\n${query}\n${body}`).digest('hex'),
    };
    const journalled = await this.o.store
      .findModelResponse(binding.sessionId, journal.messageId, journal.requestHash)
      .catch((err: unknown) => {
        this.o.log.warn({ err, turnId }, 'Model journal not read; the call goes upstream');
        return null;
      });
    if (journalled) return this.replay(res, turnId, journalled);
    const now = this.o.clock.now();
    await this.checkBudget(turnId, now);
    const secretName = agent.secret ?? name;
    const key = await this.o.secrets.get(secretName);
    if (!key)
      throw new BerthError(
        'MODEL_KEY_MISSING',
        `No secret ${secretName} on the host for agent ${agent.name} (model proxy ${name})`,
      );

    const upstream = `${(agent.baseUrl ?? this.o.upstreams[name]).replace(/\/+$/, '')}/${rest.join('/')}${query ? `?${query}` : ''}`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      // Identity encoding: the meter reads the bytes as they pass.
      'accept-encoding': 'identity',
      ...(name === 'anthropic' ? { 'x-api-key': key } : { authorization: `Bearer ${key}` }),
    };
    for (const h of REQUEST_HEADERS) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const abort = new AbortController();
    res.on('close', () => abort.abort()); // the sandbox went away: stop paying for the answer
    const startedAt = performance.now();
    failpoint('model-before-forward');
    let up: Awaited<ReturnType<typeof request>>;
    try {
      up = await request(upstream, { method: 'POST', headers, body, signal: abort.signal });
    } catch (err) {
      throw new BerthError(
        'MODEL_UPSTREAM_FAILED',
        `Model upstream ${new URL(upstream).origin} unreachable for agent ${agent.name}: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const contentType = String(up.headers['content-type'] ?? '');
    const passed: Record<string, string> = {};
    for (const [h, v] of Object.entries(up.headers))
      if (RESPONSE_HEADER.test(h) && v !== undefined) passed[h] = Array.isArray(v) ? v.join(', ') : v;
    res.writeHead(up.statusCode, passed);
    const meter = new UsageMeter(name, contentType);
    // The answer as received, for the journal; null once it is too large or cut.
    let received: Buffer[] | null = up.statusCode < 400 ? [] : null;
    let receivedBytes = 0;
    try {
      for await (const chunk of up.body as AsyncIterable<Buffer>) {
        meter.add(chunk);
        receivedBytes += chunk.length;
        if (receivedBytes > MAX_JOURNAL_BYTES) received = null;
        received?.push(chunk);
        if (!res.write(chunk)) await new Promise((r) => res.once('drain', r));
      }
      res.end();
    } catch (err) {
      // Headers are out: the only honest signal left is a cut connection.
      this.o.log.warn({ err, turnId }, 'Model response cut');
      res.destroy(err as Error);
      received = null;
    }
    if (received)
      await this.journal(turnId, journal, {
        status: up.statusCode,
        contentType,
        body: Buffer.concat(received),
      });
    const usage = meter.finish();
    this.o.log.info(
      {
        turnId,
        provider: name,
        status: up.statusCode,
        ...usage,
        ms: Math.round(performance.now() - startedAt),
      },
      'Model call',
    );
    if (up.statusCode < 400) {
      await this.o.store.recordModelUsage(
        {
          agent: agent.name,
          sessionId: binding.sessionId,
          turnId,
          generation: binding.generation,
          provider: name,
          model: agent.model ?? '',
          ...usage,
        },
        this.o.clock.now(),
      );
    }
  }

  /** The model-call checkpoint: skipped when it fails (logged), never half-used; a lost lease stops the call. */
  private async checkpoint(turnId: string): Promise<void> {
    if (!this.o.checkpoint) return;
    try {
      await this.o.checkpoint(turnId);
    } catch (err) {
      if (isBerthError(err, 'STALE_GENERATION')) throw err;
      this.o.log.warn({ err, turnId }, 'Model-call checkpoint skipped; the call goes on');
    }
  }

  /** A journalled answer, the same status, type and bytes: no upstream call, no usage. */
  private replay(res: ServerResponse, turnId: string, answer: JournalledResponse): void {
    res.writeHead(answer.status, { 'content-type': answer.contentType });
    res.end(answer.body);
    this.o.log.info(
      { turnId, status: answer.status, bytes: answer.body.length },
      'Model call answered from the journal',
    );
  }

  /** A completed answer journalled for the turn's work; a failure only costs a retry the call again. */
  private async journal(
    turnId: string,
    key: { messageId: number; requestHash: string },
    answer: JournalledResponse,
  ): Promise<void> {
    const recorded = await this.o.store
      .journalModelResponse({ ...this.o.binding, turnId, ...key, ...answer }, this.o.clock.now())
      .catch((err: unknown) => ({ code: (err as Error).message }));
    if (recorded.code !== 'ok')
      this.o.log.warn({ turnId, code: recorded.code }, 'Model answer not journalled');
  }

  /** The JSON body, with the agent's model enforced; chat-completion streams are asked to report usage. */
  private async requestBody(req: IncomingMessage, call: string): Promise<string> {
    const body = (await readJson(req, MAX_REQUEST_BYTES, 'Model')) as Record<string, unknown>;
    if (!body || typeof body !== 'object' || Array.isArray(body))
      throw new BerthError('INVALID_INPUT', 'Model request body is not a JSON object');
    const model = this.o.agent.model;
    if (body.model !== model) {
      throw new BerthError(
        'INVALID_INPUT',
        `Agent ${this.o.agent.name} may only call model ${model}, not ${JSON.stringify(body.model)}`,
      );
    }
    // The Responses API reports usage in response.completed on its own (and knows no include_usage).
    if (call === 'POST /chat/completions' && body.stream === true) {
      body.stream_options = { ...(body.stream_options as object | undefined), include_usage: true };
    }
    return JSON.stringify(body);
  }

  private async checkBudget(turnId: string, now: number): Promise<void> {
    const { agent, store, binding } = this.o;
    if (!agent.budget) return;
    const window = await store.sumModelUsage({ agent: agent.name, since: now - BUDGET_WINDOW_MS });
    const ofTurn = await store.sumModelUsage({ turnId, since: now - BUDGET_WINDOW_MS });
    const decision = decideModelBudget(agent.budget, {
      tokens: window.inputTokens + window.outputTokens,
      turns: window.turns,
      turnCounted: ofTurn.calls > 0,
    });
    if (decision.action === 'allow') return;
    await store.audit(
      {
        kind: 'model-budget-exceeded',
        sessionId: binding.sessionId,
        generation: binding.generation,
        data: { agent: agent.name, turnId, reason: decision.reason },
      },
      now,
    );
    throw new BerthError('MODEL_BUDGET_EXCEEDED', `Agent ${agent.name} ${decision.reason} (model proxy)`);
  }
}
