/**
 * Provider `openai`: a chat-completions tool-use loop with the official SDK, for OpenAI
 * and compatible servers (vLLM, Ollama, llama.cpp server), pointed at the gateway's model
 * proxy over the Unix socket with the sandbox token as its "API key" (the gateway swaps
 * in the real one). It streams and assembles the deltas itself — content and tool calls
 * by index — which compatible servers all speak; the SDK retries 429/5xx with backoff.
 * Loaded only for openai turns.
 */
import OpenAI from 'openai';
import type { TurnAssignment, TurnOutput } from '../core/protocol.js';
import * as modelTurn from './model-turn.js';
import { TOOLS } from './tools.js';

type Message = OpenAI.Chat.ChatCompletionMessageParam;
interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

export async function runOpenAI(
  turn: TurnAssignment,
  ctx: modelTurn.ModelTurnContext,
): Promise<TurnOutput[]> {
  const begun = await modelTurn.beginModelTurn<Message>(turn, ctx, (messages) => ({
    role: 'user',
    content: messages.map((m) => m.text).join('\n\n'),
  }));
  const { settings, system, history, tools: tctx } = begun;
  const client = new OpenAI({
    ...modelTurn.sdkOptions(ctx, 'openai'),
    apiKey: ctx.gateway.token,
  });
  const tools = TOOLS.map((t) => ({
    type: 'function' as const,
    function: { name: t.name, description: t.description, parameters: t.schema },
  }));

  let reply = '';
  let finishReason: string | null = null;
  for (let step = begun.firstStep; ; step++) {
    if (step >= settings.maxSteps) throw modelTurn.stepLimitError('openai', settings.maxSteps);
    await modelTurn.beforeModelCall(turn, ctx, step, history);
    const messages: Message[] = system ? [{ role: 'system', content: system }, ...history] : history;
    let content = '';
    const calls: ToolCall[] = [];
    try {
      const stream = await client.chat.completions.create({
        model: settings.model,
        max_tokens: settings.maxTokens,
        messages,
        tools,
        stream: true,
      });
      let chunks = 0;
      for await (const chunk of stream) {
        chunks++;
        // The usage-only chunk at the end has no choices.
        const choice = chunk.choices?.[0];
        if (!choice) continue;
        content += choice.delta?.content ?? '';
        for (const d of choice.delta?.tool_calls ?? []) {
          calls[d.index] ??= { id: '', name: '', arguments: '' };
          const call = calls[d.index]!;
          call.id ||= d.id ?? '';
          call.name += d.function?.name ?? '';
          call.arguments += d.function?.arguments ?? '';
        }
        finishReason = choice.finish_reason ?? finishReason;
      }
      if (chunks === 0) throw new Error('the stream ended without a single chunk');
    } catch (err) {
      throw new Error(`openai: ${(err as Error).message}`, { cause: err });
    }
    const toolCalls = calls.filter(Boolean).map((c, i) => ({ ...c, id: c.id || `call_${step}_${i}` }));
    history.push({
      role: 'assistant',
      content: content || null,
      ...(toolCalls.length
        ? {
            tool_calls: toolCalls.map((c) => ({
              id: c.id,
              type: 'function' as const,
              function: { name: c.name, arguments: c.arguments },
            })),
          }
        : {}),
    });
    if (content) reply = content;
    await modelTurn.postText(ctx, content);
    if (toolCalls.length === 0) break;
    for (const call of toolCalls) {
      const result = await modelTurn.runToolCall(ctx, tctx, call.name, parseArguments(call.arguments));
      history.push({ role: 'tool', tool_call_id: call.id, content: result.output });
    }
  }
  await modelTurn.endModelTurn(ctx);
  await modelTurn.saveConversation(ctx, 'openai', history, (m) => m.role === 'user');
  return [{ text: reply, data: { provider: 'openai', model: settings.model, finishReason } }];
}

/** Malformed arguments stay a string, which runTool refuses with an error the model sees. */
function parseArguments(text: string): unknown {
  try {
    return text.trim() ? JSON.parse(text) : {};
  } catch {
    return text;
  }
}
