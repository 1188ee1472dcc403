/**
 * Local model servers speaking the real wire protocols, for tests: the Anthropic
 * Messages API (JSON and streaming SSE: message_start, content_block_*, message_delta,
 * message_stop), OpenAI chat completions (JSON and streaming chunks, tool_calls by
 * index, the usage chunk when stream_options.include_usage, [DONE]) and the OpenAI
 * Responses API (JSON and streaming: response.created, output_item.added/done,
 * output_text and function_call_arguments deltas, response.completed with the usage).
 * Each request takes the next step of a script: a text answer, a tool call, an HTTP error
 * in the provider's error shape, or a malformed body. A harness's side calls (a title for
 * the session, say) are answered by `side` without taking a step. Every request is
 * recorded (path, headers, body) with the usage the server reported, so a test can check
 * what reached "the provider".
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ScriptStep =
  | { text: string }
  | { tool: { name: string; input: Record<string, unknown> }; text?: string }
  | { status: number; retryAfterMs?: number }
  | { malformed: true };

export interface RecordedRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: Record<string, unknown>;
  /** Usage this server reported for it (0/0 for errors). */
  usage: { input: number; output: number };
  /** Answered by `side`, not by the script. */
  side?: true;
}

export interface FakeModelServer {
  /** Base URL as the SDKs take it: ANTHROPIC_BASE_URL, or OPENAI_BASE_URL (ending in /v1). */
  url: string;
  requests: RecordedRequest[];
  script: ScriptStep[];
  /** A text answer for a side call (one the script does not plan for), or undefined. @default none */
  side: (body: Record<string, unknown>) => string | undefined;
  /** The requests the script answered (side calls left out). */
  scripted(): RecordedRequest[];
  close(): Promise<void>;
}

type Writer = (req: RecordedRequest, step: ScriptStep, res: ServerResponse, n: number) => void;

async function start(kind: 'anthropic' | 'openai', script: ScriptStep[]): Promise<FakeModelServer> {
  const requests: RecordedRequest[] = [];
  const writers: Record<string, Writer> =
    kind === 'anthropic'
      ? { '/v1/messages': writeAnthropic }
      : { '/v1/chat/completions': writeOpenAI, '/v1/responses': writeResponses };
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>;
    // Deterministic "token counts": the prompt's size in 16-byte units, 7 + the reply's length.
    const prompt = body.messages ?? body.input ?? [];
    const usage = { input: Math.ceil(JSON.stringify(prompt).length / 16), output: 0 };
    const recorded: RecordedRequest = { path: req.url ?? '', headers: req.headers, body, usage };
    requests.push(recorded);
    const write = writers[(req.url ?? '').split('?')[0]!];
    if (req.method !== 'POST' || !write) return error(kind, res, 404, 'not_found_error', 'no such route');
    const sideText = fake.side(body);
    if (sideText !== undefined) recorded.side = true;
    const step = sideText !== undefined ? { text: sideText } : fake.script.shift();
    if (!step) return error(kind, res, 400, 'invalid_request_error', 'fake script exhausted');
    if ('status' in step) {
      recorded.usage.input = 0;
      const headers: Record<string, string> =
        step.retryAfterMs === undefined ? {} : { 'retry-after-ms': String(step.retryAfterMs) };
      const type =
        step.status === 429 ? 'rate_limit_error' : step.status === 529 ? 'overloaded_error' : 'api_error';
      return error(kind, res, step.status, type, `scripted ${step.status}`, headers);
    }
    if ('malformed' in step) {
      const sse = body.stream === true;
      res.writeHead(200, { 'content-type': sse ? 'text/event-stream' : 'application/json' });
      return res.end(
        sse ? 'event: message_start\ndata: {"type": "message_st\n\n' : '{"id": "msg_1", "content": [',
      );
    }
    recorded.usage.output = 7 + ('text' in step && step.text ? step.text.length : 0);
    write(recorded, step, res, requests.length);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  const fake: FakeModelServer = {
    url: kind === 'anthropic' ? `http://127.0.0.1:${port}` : `http://127.0.0.1:${port}/v1`,
    requests,
    script,
    side: () => undefined,
    scripted: () => requests.filter((r) => !r.side),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
  return fake;
}

export const startFakeAnthropic = (script: ScriptStep[]) => start('anthropic', script);
export const startFakeOpenAI = (script: ScriptStep[]) => start('openai', script);

function error(
  kind: 'anthropic' | 'openai',
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
): void {
  const body =
    kind === 'anthropic'
      ? { type: 'error', error: { type, message } }
      : { error: { message, type, code: null, param: null } };
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
}

function sse(res: ServerResponse, events: [string | null, unknown][]): void {
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
  for (const [event, data] of events)
    res.write(
      `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`,
    );
  res.end();
}

function writeAnthropic(req: RecordedRequest, step: ScriptStep, res: ServerResponse, n: number): void {
  const text = 'text' in step ? step.text : undefined;
  type Block =
    | { type: 'text'; text: string; citations: null }
    | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };
  const tool: Block | null =
    'tool' in step
      ? { type: 'tool_use', id: `toolu_${n}`, name: step.tool.name, input: step.tool.input }
      : null;
  const content: Block[] = [
    ...(text ? [{ type: 'text' as const, text, citations: null }] : []),
    ...(tool ? [tool] : []),
  ];
  const stopReason = tool ? 'tool_use' : 'end_turn';
  const usage = { input_tokens: req.usage.input, output_tokens: req.usage.output };
  const message = {
    id: `msg_${n}`,
    type: 'message',
    role: 'assistant',
    model: req.body.model,
    stop_sequence: null,
  };
  if (req.body.stream !== true) {
    res
      .writeHead(200, { 'content-type': 'application/json', 'request-id': `req_${n}` })
      .end(JSON.stringify({ ...message, content, stop_reason: stopReason, usage }));
    return;
  }
  const events: [string, unknown][] = [
    [
      'message_start',
      {
        type: 'message_start',
        message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } },
      },
    ],
  ];
  content.forEach((block, index) => {
    if (block.type === 'text') {
      const t = block.text;
      const half = Math.ceil(t.length / 2);
      events.push([
        'content_block_start',
        { type: 'content_block_start', index, content_block: { type: 'text', text: '' } },
      ]);
      for (const part of [t.slice(0, half), t.slice(half)])
        events.push([
          'content_block_delta',
          { type: 'content_block_delta', index, delta: { type: 'text_delta', text: part } },
        ]);
    } else {
      const json = JSON.stringify(block.input);
      const half = Math.ceil(json.length / 2);
      events.push([
        'content_block_start',
        {
          type: 'content_block_start',
          index,
          content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} },
        },
      ]);
      for (const part of [json.slice(0, half), json.slice(half)])
        events.push([
          'content_block_delta',
          { type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: part } },
        ]);
    }
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push(
    ['ping', { type: 'ping' }],
    [
      'message_delta',
      {
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: { output_tokens: usage.output_tokens },
      },
    ],
    ['message_stop', { type: 'message_stop' }],
  );
  sse(res, events);
}

function writeOpenAI(req: RecordedRequest, step: ScriptStep, res: ServerResponse, n: number): void {
  const text = 'text' in step ? (step.text ?? null) : null;
  const call =
    'tool' in step
      ? {
          id: `call_${n}`,
          type: 'function',
          function: { name: step.tool.name, arguments: JSON.stringify(step.tool.input) },
        }
      : null;
  const finish = call ? 'tool_calls' : 'stop';
  const usage = {
    prompt_tokens: req.usage.input,
    completion_tokens: req.usage.output,
    total_tokens: req.usage.input + req.usage.output,
  };
  const base = {
    id: `chatcmpl-${n}`,
    created: 1_700_000_000,
    model: req.body.model,
    system_fingerprint: null,
  };
  if (req.body.stream !== true) {
    const message = {
      role: 'assistant',
      content: text,
      refusal: null,
      ...(call ? { tool_calls: [call] } : {}),
    };
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        ...base,
        object: 'chat.completion',
        choices: [{ index: 0, message, finish_reason: finish, logprobs: null }],
        usage,
      }),
    );
    return;
  }
  const chunk = (delta: unknown, finishReason: string | null = null) => ({
    ...base,
    object: 'chat.completion.chunk',
    choices: [{ index: 0, delta, finish_reason: finishReason, logprobs: null }],
  });
  const events: [null, unknown][] = [[null, chunk({ role: 'assistant', content: '' })]];
  if (text) {
    const half = Math.ceil(text.length / 2);
    for (const part of [text.slice(0, half), text.slice(half)]) events.push([null, chunk({ content: part })]);
  }
  if (call) {
    const args = call.function.arguments;
    const half = Math.ceil(args.length / 2);
    events.push([
      null,
      chunk({
        tool_calls: [
          { index: 0, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } },
        ],
      }),
    ]);
    for (const part of [args.slice(0, half), args.slice(half)])
      events.push([null, chunk({ tool_calls: [{ index: 0, function: { arguments: part } }] })]);
  }
  events.push([null, chunk({}, finish)]);
  const options = req.body.stream_options as { include_usage?: boolean } | undefined;
  if (options?.include_usage)
    events.push([null, { ...base, object: 'chat.completion.chunk', choices: [], usage }]);
  events.push([null, '[DONE]']);
  sse(res, events);
}

/** The Responses API (POST /v1/responses): a message item and/or a function_call item. */
function writeResponses(req: RecordedRequest, step: ScriptStep, res: ServerResponse, n: number): void {
  const text = 'text' in step ? step.text : undefined;
  const message = text
    ? {
        type: 'message',
        id: `msg_${n}`,
        status: 'completed',
        role: 'assistant',
        content: [{ type: 'output_text', text, annotations: [] }],
      }
    : null;
  const call =
    'tool' in step
      ? {
          type: 'function_call',
          id: `fc_${n}`,
          call_id: `call_${n}`,
          name: step.tool.name,
          arguments: JSON.stringify(step.tool.input),
          status: 'completed',
        }
      : null;
  const output = [...(message ? [message] : []), ...(call ? [call] : [])];
  const usage = {
    input_tokens: req.usage.input,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: req.usage.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: req.usage.input + req.usage.output,
  };
  const response = {
    id: `resp_${n}`,
    object: 'response',
    created_at: 1_700_000_000,
    model: req.body.model,
    error: null,
    incomplete_details: null,
    parallel_tool_calls: true,
    tools: [],
  };
  if (req.body.stream !== true) {
    res
      .writeHead(200, { 'content-type': 'application/json' })
      .end(JSON.stringify({ ...response, status: 'completed', output, usage }));
    return;
  }
  let seq = 0;
  const events: [string, unknown][] = [];
  const event = (type: string, fields: Record<string, unknown>) =>
    events.push([type, { type, sequence_number: seq++, ...fields }]);
  event('response.created', { response: { ...response, status: 'in_progress', output: [], usage: null } });
  output.forEach((item, output_index) => {
    if (item.type === 'message') {
      const t = text!;
      const half = Math.ceil(t.length / 2);
      event('response.output_item.added', {
        output_index,
        item: { ...item, status: 'in_progress', content: [] },
      });
      event('response.content_part.added', {
        item_id: item.id,
        output_index,
        content_index: 0,
        part: { type: 'output_text', text: '', annotations: [] },
      });
      for (const delta of [t.slice(0, half), t.slice(half)])
        event('response.output_text.delta', { item_id: item.id, output_index, content_index: 0, delta });
      event('response.output_text.done', { item_id: item.id, output_index, content_index: 0, text: t });
      event('response.content_part.done', {
        item_id: item.id,
        output_index,
        content_index: 0,
        part: { type: 'output_text', text: t, annotations: [] },
      });
    } else {
      const args = (item as { arguments: string }).arguments;
      const half = Math.ceil(args.length / 2);
      event('response.output_item.added', {
        output_index,
        item: { ...item, status: 'in_progress', arguments: '' },
      });
      for (const delta of [args.slice(0, half), args.slice(half)])
        event('response.function_call_arguments.delta', { item_id: item.id, output_index, delta });
      event('response.function_call_arguments.done', { item_id: item.id, output_index, arguments: args });
    }
    event('response.output_item.done', { output_index, item });
  });
  event('response.completed', { response: { ...response, status: 'completed', output, usage } });
  sse(res, events);
}
