// Reads the JSON-lines progress stream that the Docker Engine API returns for image builds and
// imports.
//
// Invariants:
// - The stream's first `error`/`errorDetail` line rejects with the engine's message: these
//   endpoints report a failed build or import inside the stream, not as an HTTP status.
// - Blank and non-JSON lines are skipped, never fatal.
import { createInterface } from 'node:readline';

/** Reads a JSON-lines progress stream of the Engine API; rejects on its first `error` line. */
export async function followJsonStream(
  stream: NodeJS.ReadableStream,
  onLine: (line: Record<string, unknown>) => void,
): Promise<void> {
  for await (const text of createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY })) {
    if (!text.trim()) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      continue; // the engine interleaves nothing else, but a stray line must not mask the result
    }
    if (line.error !== undefined || line.errorDetail !== undefined) {
      const detail = line.errorDetail as { message?: string } | undefined;
      throw new Error(String(detail?.message ?? line.error));
    }
    onLine(line);
  }
}
