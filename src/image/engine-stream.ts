// Reads the JSON-lines progress stream that the Docker Engine API returns for image builds and
// imports.
//
// Invariants:
// - The stream's first `error`/`errorDetail` line rejects with the engine's message: these
//   endpoints report a failed build or import inside the stream, not as an HTTP status.
// - Blank and non-JSON lines are skipped, never fatal: the engine interleaves nothing else,
//   but a stray line must not mask the result.
import { jsonLines } from '../core/index.js';

/** Reads a JSON-lines progress stream of the Engine API; rejects on its first `error` line. */
export async function followJsonStream(
  stream: NodeJS.ReadableStream,
  onLine: (line: Record<string, unknown>) => void,
): Promise<void> {
  for await (const value of jsonLines(stream as AsyncIterable<string | Uint8Array>, { skipInvalid: true })) {
    if (typeof value !== 'object' || value === null) continue;
    const line = value as Record<string, unknown>;
    if (line.error !== undefined || line.errorDetail !== undefined) {
      const detail = line.errorDetail as { message?: string } | undefined;
      throw new Error(String(detail?.message ?? line.error));
    }
    onLine(line);
  }
}
