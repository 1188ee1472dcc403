/**
 * Provider `anthropic`: a Messages API tool-use loop with the official SDK, pointed at
 * the gateway's model proxy over the Unix socket. The SDK's "auth token" is the sandbox
 * token; the gateway replaces it with the real key on the host. The SDK streams (SSE),
 * retries 429/5xx/529 with backoff (honouring retry-after) and does not retry the
 * gateway's own refusals (x-should-retry: false). Loaded only for anthropic turns.
 */
import Anthropic from '@anthropic-ai/sdk';
import type { TurnAssignment, TurnOutput } from '../core/protocol.js';
import * as modelTurn from './model-turn.js';
import { TOOLS } from './tools.js';

export async function runAnthropic(
  turn: TurnAssignment,
  ctx: modelTurn.ModelTurnContext,
): Promise<TurnOutput[]> {
  const begun = await modelTurn.beginModelTurn<Anthropic.MessageParam>(turn, ctx, (messages) => ({
    role: 'user',
    content: messages.map((m) => ({ type: 'text' as const, text: m.text })),
  }));
  const { settings, system, history, tools: tctx } = begun;
  const client = new Anthropic({
    ...modelTurn.sdkOptions(ctx, 'anthropic'),
    authToken: ctx.gateway.token,
  });
  const tools = TOOLS.map((t) => ({ name: t.name, description: t.description, input_schema: t.schema }));

  let reply = '';
  let stopReason: string | null = null;
  for (let step = begun.firstStep; ; step++) {
    if (step >= settings.maxSteps) throw modelTurn.stepLimitError('anthropic', settings.maxSteps);
    await modelTurn.beforeModelCall(turn, ctx, step, history);
    let message: Anthropic.Message;
    try {
      message = await client.messages
        .stream({
          model: settings.model,
          max_tokens: settings.maxTokens,
          ...(system ? { system } : {}),
          tools,
          messages: history,
        })
        .finalMessage();
    } catch (err) {
      throw new Error(`anthropic: ${(err as Error).message}`, { cause: err });
    }
    history.push({ role: 'assistant', content: message.content as Anthropic.ContentBlockParam[] });
    stopReason = message.stop_reason;
    const text = message.content
      .filter((b): b is Anthropic.TextBlock => b.type === 'text')
      .map((b) => b.text)
      .join('');
    if (text) reply = text;
    await modelTurn.postText(ctx, text);
    const uses = message.content.filter((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    if (message.stop_reason !== 'tool_use' || uses.length === 0) break;
    const results: Anthropic.ToolResultBlockParam[] = [];
    for (const use of uses) {
      const result = await modelTurn.runToolCall(ctx, tctx, use.name, use.input);
      results.push({
        type: 'tool_result',
        tool_use_id: use.id,
        content: result.output,
        is_error: result.isError,
      });
    }
    history.push({ role: 'user', content: results });
  }
  await modelTurn.endModelTurn(ctx);
  // An exchange starts at a user message the user wrote (text), not at one carrying tool results.
  await modelTurn.saveConversation(ctx, 'anthropic', history, (m) => {
    const content = m.content;
    return m.role === 'user' && (typeof content === 'string' || content.every((b) => b.type === 'text'));
  });
  return [{ text: reply, data: { provider: 'anthropic', model: settings.model, stopReason } }];
}
