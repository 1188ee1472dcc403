/**
 * The one JSON-lines reader: a stream of text chunks (the Docker Engine's event and
 * progress streams, a child's stdout) becomes one parsed value per line. A line may be
 * split across chunks, and so may a UTF-8 character; blank lines are skipped. Pure: it
 * reads only the chunks it is given.
 */

export interface JsonLinesOptions {
  /** A line that is not JSON is passed over instead of throwing. @default false */
  skipInvalid?: boolean;
}

/** Each line of `chunks` parsed as JSON, in order; the last line needs no newline. */
export async function* jsonLines(
  chunks: AsyncIterable<string | Uint8Array>,
  options: JsonLinesOptions = {},
): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let rest = '';
  for await (const chunk of chunks) {
    const lines = (
      rest + (typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }))
    ).split('\n');
    rest = lines.pop() ?? '';
    for (const line of lines) yield* parsed(line, options);
  }
  yield* parsed(rest + decoder.decode(), options);
}

/** Each line of a whole text parsed as JSON (a command's output, read at once). */
export function parseJsonLines(text: string, options: JsonLinesOptions = {}): unknown[] {
  return text.split('\n').flatMap((line) => [...parsed(line, options)]);
}

function* parsed(line: string, options: JsonLinesOptions): Generator<unknown> {
  const text = line.trim();
  if (!text) return;
  try {
    yield JSON.parse(text);
  } catch (err) {
    if (!options.skipInvalid) throw err;
  }
}
