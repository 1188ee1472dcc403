/**
 * The model of the chaos run's long turns: a local server speaking the Anthropic Messages
 * API (`POST /v1/messages`, JSON or streamed as server-sent events: message_start,
 * content_block_start/delta/stop, message_delta, message_stop), scripted by the plan in the
 * turn's own message (workload.ts, longTurnPlan). A request's turn message is its last
 * user message holding text; its call index is the number of tool results after it. Call
 * i < the plan's steps answers with a `bash` tool call doing step i; the call after the
 * last step answers with the plan's reply as text.
 *
 * Every request it takes is logged as a ModelCall, keyed by (session, turn, index), with
 * when it came and when its answer's last byte was handed to the socket: a later call of
 * the same key is a call redone upstream (redone-calls.ts). A call berth's model journal
 * answers never reaches this server, so it is not logged.
 *
 * Invariants: the answer to a call is a function of its key and the plan alone (the same
 * bytes each time it is asked, like a journal replay); a request that names no plan gets
 * a 400 in the API's error shape, logged with session ''.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ScriptPlan } from '../core/index.js';
import { appendCommand, readPlan, replyOwner } from './workload.js';

export interface ModelCall {
  session: string;
  turn: number;
  index: number;
  /** When the request's body had arrived, epoch ms. */
  receivedAt: number;
  /** When the answer's last byte was written; null when it never was (the caller went away, or a 400). */
  answeredAt: number | null;
}

export interface ScriptedModel {
  /** The base URL an agent's `baseUrl` takes. */
  url: string;
  /** Every call taken, in arrival order. */
  calls: ModelCall[];
  close(): Promise<void>;
}

type Block =
  | { type: 'text'; text: string }
  | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export async function startScriptedModel(): Promise<ScriptedModel> {
  const calls: ModelCall[] = [];
  const server = createServer((req, res) => {
    void answer(req, res, calls).catch(() => res.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

async function answer(req: IncomingMessage, res: ServerResponse, calls: ModelCall[]): Promise<void> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  if (req.method !== 'POST' || (req.url ?? '').split('?')[0] !== '/v1/messages')
    return apiError(res, 404, 'not_found_error', 'no such route');
  const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
  const turn = turnOf(body.messages);
  const owner = turn && replyOwner(turn.plan.reply ?? '');
  const call: ModelCall = {
    session: owner?.session ?? '',
    turn: owner?.turn ?? 0,
    index: turn?.index ?? 0,
    receivedAt: Date.now(),
    answeredAt: null,
  };
  calls.push(call);
  if (!turn || !owner)
    return apiError(res, 400, 'invalid_request_error', 'no chaos plan in the turn message');
  res.on('finish', () => {
    call.answeredAt = Date.now();
  });
  const step = turn.plan.steps[turn.index];
  const id = `${owner.session}-${owner.turn}-${turn.index}`;
  const content: Block[] =
    step && 'append' in step
      ? [{ type: 'tool_use', id: `toolu_${id}`, name: 'bash', input: { command: appendCommand(step) } }]
      : [{ type: 'text', text: turn.plan.reply ?? '' }];
  writeMessage(res, body, `msg_${id}`, content);
}

/** The plan of the request's turn message, and how many tool results came after it. */
function turnOf(messages: unknown): { plan: ScriptPlan; index: number } | null {
  if (!Array.isArray(messages)) return null;
  let index = 0;
  for (const m of [...messages].reverse() as { role?: string; content?: unknown }[]) {
    if (m.role !== 'user') continue;
    const blocks: { type?: string; text?: string }[] =
      typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (m.content as []);
    const text = blocks.find((b) => b.type === 'text')?.text;
    if (text === undefined) {
      index += blocks.filter((b) => b.type === 'tool_result').length;
      continue;
    }
    const plan = readPlan(text);
    return plan && Array.isArray(plan.steps) ? { plan, index } : null;
  }
  return null;
}

function writeMessage(
  res: ServerResponse,
  body: Record<string, unknown>,
  id: string,
  content: Block[],
): void {
  const stopReason = content[0]?.type === 'tool_use' ? 'tool_use' : 'end_turn';
  const usage = { input_tokens: Math.ceil(JSON.stringify(body.messages).length / 16), output_tokens: 10 };
  const message = { id, type: 'message', role: 'assistant', model: body.model, stop_sequence: null };
  if (body.stream !== true) {
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ...message, content, stop_reason: stopReason, usage }));
    return;
  }
  const events: [string, unknown][] = [
    ['message_start', { message: { ...message, content: [], stop_reason: null, usage } }],
  ];
  content.forEach((block, index) => {
    const [start, delta] =
      block.type === 'text'
        ? [
            { ...block, text: '' },
            { type: 'text_delta', text: block.text },
          ]
        : [
            { ...block, input: {} },
            { type: 'input_json_delta', partial_json: JSON.stringify(block.input) },
          ];
    events.push(
      ['content_block_start', { index, content_block: start }],
      ['content_block_delta', { index, delta }],
      ['content_block_stop', { index }],
    );
  });
  events.push(
    [
      'message_delta',
      { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 10 } },
    ],
    ['message_stop', {}],
  );
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  res.end(
    events
      .map(([type, data]) => `event: ${type}\ndata: ${JSON.stringify({ type, ...(data as object) })}\n\n`)
      .join(''),
  );
}

function apiError(res: ServerResponse, status: number, type: string, message: string): void {
  res
    .writeHead(status, { 'content-type': 'application/json' })
    .end(JSON.stringify({ type: 'error', error: { type, message } }));
}
