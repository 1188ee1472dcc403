/**
 * What the anthropic and openai loops share: the system prompt, the conversation kept in
 * session state, the tool context, and progress posting.
 *
 * The conversation is committed with the turn (state key `berth.conversation`), so a
 * turn that is retried — its sandbox killed mid tool-call, say — starts again from the
 * conversation as the last committed turn left it, with the same workspace files, and
 * runs its messages once more from there: the history never holds half a turn. It is
 * trimmed from the oldest whole exchange to stay within the state a turn may put.
 *
 * Within a turn, before each model call, the loop writes its message list (the request's
 * conversation: every tool result so far) to MODEL_CALL_FILE in the workspace. The gateway
 * checkpoints the turn at that call, so the checkpoint's layer holds the list as of the
 * request; a retry resumed from it (turn.checkpoint) continues the loop from that list and
 * step instead of the turn's first prompt, and its first request is the checkpointed one,
 * which the gateway answers from its journal when the answer had come. The file is removed
 * before the commit: it never enters the committed tree.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import {
  MODEL_PROXY_PATH,
  type ModelSettings,
  type TurnAssignment,
  toolProgressText,
} from '../core/protocol.js';
import { socketFetch } from './socket-fetch.js';
import { runTool, type ToolContext, type ToolResult } from './tools.js';
import type { TurnContext } from './turn-context.js';

export const CONVERSATION_KEY = 'berth.conversation';
/** Half of what a turn may put in state: the rest is the agent's own. */
const MAX_CONVERSATION_BYTES = 512 * 1024;
const MAX_AGENT_MD_BYTES = 64 * 1024;
/** A progress event carries at most this much of the model's text. */
const PROGRESS_CHARS = 2000;
/** The SDKs retry 429, 5xx (and 529) this many times, with their own backoff. */
const SDK_MAX_RETRIES = 4;

/** The loop's message list at its latest model call, in the workspace: checkpointed with the call. */
export const MODEL_CALL_FILE = '.berth/model-call.json';

/** The runner's turn context: the model loops reach the model proxy through its gateway client. */
export type ModelTurnContext = TurnContext;

interface ModelCall<M> {
  provider: string;
  messageIds: number[];
  step: number;
  messages: M[];
}

/** What a loop starts from (beginModelTurn). */
interface ModelTurnStart<M> {
  settings: ModelSettings;
  system: string;
  tools: ToolContext;
  /** The conversation so far, the turn's prompt at its end. */
  history: M[];
  firstStep: number;
}

/**
 * What a loop starts from: its settings, system prompt, tool context, the conversation so
 * far with the turn's `prompt` at its end, and its first step. A turn resumed from the
 * checkpoint of a model call starts at that call's step with its messages (the prompt
 * already in them); any other at step 0 from the committed conversation.
 */
export async function beginModelTurn<M>(
  turn: TurnAssignment,
  ctx: ModelTurnContext,
  prompt: (messages: TurnAssignment['messages']) => M,
): Promise<ModelTurnStart<M>> {
  const settings = turn.model;
  if (!settings) throw new Error(`turn ${turn.turnId} of a ${turn.provider} agent carries no model settings`);
  const resumed = turn.checkpoint ? await checkpointedCall<M>(turn, ctx.workspace) : null;
  const history = resumed?.messages ?? [
    ...(await loadConversation<M>(ctx, turn.provider)),
    prompt(turn.messages),
  ];
  return {
    settings,
    system: await systemPrompt(settings, ctx.workspace),
    tools: {
      workspace: ctx.workspace,
      maxOutputBytes: turn.limits.maxOutputBytes,
      bashTimeoutMs: settings.toolTimeoutMs,
      attempt: turn.attempt,
      getState: ctx.getState,
      putState: ctx.putState,
      gateway: ctx.gateway,
      resident: ctx.resident,
    },
    history,
    firstStep: resumed?.step ?? 0,
  };
}

/** Before each model call: the message list it sends, for the checkpoint the gateway takes at it. */
export async function beforeModelCall<M>(
  turn: TurnAssignment,
  ctx: ModelTurnContext,
  step: number,
  messages: M[],
): Promise<void> {
  // A resident sandbox writes in place and takes no checkpoints at model calls.
  if (ctx.resident) return;
  const file = join(ctx.workspace, MODEL_CALL_FILE);
  await mkdir(dirname(file), { recursive: true });
  const call: ModelCall<M> = {
    provider: turn.provider,
    messageIds: turn.messages.map((m) => m.id),
    step,
    messages,
  };
  await writeFile(file, JSON.stringify(call));
}

/** The loop is done: its checkpoint file goes, before the commit. */
export async function endModelTurn(ctx: ModelTurnContext): Promise<void> {
  await rm(join(ctx.workspace, MODEL_CALL_FILE), { force: true });
}

/**
 * The checkpointed model call of a resumed turn: only of this provider and these very
 * messages (a retry that later messages joined starts its loop from the committed
 * conversation, over the checkpointed files).
 */
async function checkpointedCall<M>(turn: TurnAssignment, workspace: string): Promise<ModelCall<M> | null> {
  const text = await readFile(join(workspace, MODEL_CALL_FILE), 'utf8').catch(() => null);
  if (text === null) return null;
  const call = JSON.parse(text) as ModelCall<M>;
  const ids = turn.messages.map((m) => m.id);
  const same = call.messageIds.length === ids.length && call.messageIds.every((id, i) => id === ids[i]);
  return call.provider === turn.provider && same && Array.isArray(call.messages) ? call : null;
}

/**
 * Client options for either SDK: the gateway's model proxy over the socket, the sandbox
 * token as the credential the SDK sends (the gateway swaps it for the key).
 */
export function sdkOptions(ctx: ModelTurnContext, provider: 'anthropic' | 'openai') {
  return {
    baseURL: `http://berth-gateway${MODEL_PROXY_PATH}/${provider}`,
    fetch: socketFetch(ctx.gateway.socketPath),
    maxRetries: SDK_MAX_RETRIES,
  };
}

/** Runs one tool the model asked for, with its started/finished progress events. */
export async function runToolCall(
  ctx: ModelTurnContext,
  tools: ToolContext,
  name: string,
  input: unknown,
): Promise<ToolResult> {
  await ctx.progress(toolProgressText(name, 'started'));
  const result = await runTool(name, input, tools);
  await ctx.progress(toolProgressText(name, 'finished', result.isError));
  return result;
}

/** The agent's instructions, then the workspace's AGENT.md when there is one. */
async function systemPrompt(settings: ModelSettings, workspace: string): Promise<string> {
  const agentMd = await readFile(join(workspace, 'AGENT.md'), 'utf8').catch(() => '');
  return [settings.instructions.trim(), agentMd.slice(0, MAX_AGENT_MD_BYTES).trim()]
    .filter(Boolean)
    .join('\n\n');
}

/** The committed conversation of this provider; empty when none (or another provider's). */
async function loadConversation<M>(ctx: ModelTurnContext, provider: string): Promise<M[]> {
  const saved = (await ctx.getState(CONVERSATION_KEY)) as { provider?: string; messages?: M[] } | undefined;
  return saved?.provider === provider && Array.isArray(saved.messages) ? saved.messages : [];
}

/**
 * Saves the conversation for the commit, dropping the oldest exchanges (from one
 * exchange start to the next, as `startsExchange` says) until it fits.
 */
export async function saveConversation<M>(
  ctx: ModelTurnContext,
  provider: string,
  messages: M[],
  startsExchange: (m: M) => boolean,
): Promise<void> {
  let kept = messages;
  while (kept.length > 1 && Buffer.byteLength(JSON.stringify(kept)) > MAX_CONVERSATION_BYTES) {
    const next = kept.findIndex((m, i) => i > 0 && startsExchange(m));
    kept = next === -1 ? [] : kept.slice(next);
  }
  await ctx.putState(CONVERSATION_KEY, { provider, messages: kept });
}

export async function postText(ctx: ModelTurnContext, text: string): Promise<void> {
  const trimmed = text.trim();
  if (!trimmed) return;
  await ctx.progress(trimmed.length > PROGRESS_CHARS ? `${trimmed.slice(0, PROGRESS_CHARS)}…` : trimmed);
}

export function stepLimitError(provider: string, maxSteps: number): Error {
  return new Error(
    `${provider}: the model made ${maxSteps} calls in one turn without finishing (agent maxSteps)`,
  );
}
