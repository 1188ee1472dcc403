/**
 * Reads token usage out of a model response as it streams through the proxy, without
 * holding it back: a JSON body (kept up to a limit, parsed at the end) or Server-Sent
 * Events (parsed line by line). Anthropic reports input tokens in `message_start` and the
 * final output count in `message_delta`; OpenAI-compatible servers report both in the
 * last chunk (the proxy asks for it with stream_options.include_usage) or in the body;
 * the Responses API in `response.completed` (or the body), as input/output_tokens.
 * For each field the last report wins; a response that reports nothing counts zero.
 */

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

const MAX_JSON_BYTES = 16 * 1024 * 1024;

export class UsageMeter {
  private readonly usage: TokenUsage = { inputTokens: 0, outputTokens: 0 };
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private lineRest = '';
  private readonly sse: boolean;

  constructor(
    private readonly provider: 'anthropic' | 'openai',
    contentType: string,
  ) {
    this.sse = contentType.includes('text/event-stream');
  }

  add(chunk: Buffer): void {
    if (this.sse) {
      const lines = (this.lineRest + chunk.toString('utf8')).split('\n');
      this.lineRest = lines.pop() ?? '';
      for (const line of lines) this.readLine(line);
    } else if (this.size + chunk.length <= MAX_JSON_BYTES) {
      this.chunks.push(chunk);
      this.size += chunk.length;
    }
  }

  /** The usage once the response ended. */
  finish(): TokenUsage {
    if (this.sse) this.readLine(this.lineRest);
    else this.take(parse(Buffer.concat(this.chunks).toString('utf8')));
    return { ...this.usage };
  }

  private readLine(line: string): void {
    const m = /^data:\s?(.*)$/.exec(line.trimEnd());
    if (m && m[1] !== '[DONE]') this.take(parse(m[1]!));
  }

  private take(body: unknown): void {
    if (!body || typeof body !== 'object') return;
    const b = body as { usage?: unknown; message?: { usage?: unknown }; response?: { usage?: unknown } };
    const reported = (b.usage ?? b.message?.usage ?? b.response?.usage) as
      | Record<string, unknown>
      | undefined
      | null;
    if (!reported || typeof reported !== 'object') return;
    const n = (key: string) => (typeof reported[key] === 'number' ? (reported[key] as number) : undefined);
    if (this.provider === 'anthropic') {
      const input = n('input_tokens');
      // Cached prompt tokens are reported apart from input_tokens; they are input all the same.
      if (input !== undefined)
        this.usage.inputTokens =
          input + (n('cache_creation_input_tokens') ?? 0) + (n('cache_read_input_tokens') ?? 0);
      this.usage.outputTokens = n('output_tokens') ?? this.usage.outputTokens;
    } else {
      // Chat completions name them prompt/completion tokens, the Responses API input/output tokens.
      this.usage.inputTokens = n('prompt_tokens') ?? n('input_tokens') ?? this.usage.inputTokens;
      this.usage.outputTokens = n('completion_tokens') ?? n('output_tokens') ?? this.usage.outputTokens;
    }
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null; // a malformed response is the caller's error to see, not the meter's
  }
}
