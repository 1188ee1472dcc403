/**
 * The SDK's side of a live sandbox's files (`berth.sessions.sandboxFiles`): the workspace
 * as the session's sandbox sees it now, not its committed history (`sessions.files`). A
 * path is relative to the workspace or absolute under /workspace. Reads and writes stream;
 * nothing is sent again on its own (a write may have landed before a connection broke).
 */
import type { SandboxFileEntry } from '../core/index.js';
import type { ApiClient } from './http.js';

/** What `write` takes: the whole content, or a stream of it (sent as it is read). */
export type FileBody = string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface SandboxFiles {
  /** The whole file. */
  read(id: string, path: string, signal?: AbortSignal): Promise<Buffer>;
  /** The file's bytes as they come (for files too big to hold). */
  readStream(id: string, path: string, signal?: AbortSignal): Promise<ReadableStream<Uint8Array>>;
  /** Creates or replaces the file atomically, within the agent's workspaceMb (WORKSPACE_QUOTA_EXCEEDED leaves nothing). */
  write(id: string, path: string, body: FileBody, options?: { mkdirs?: boolean }): Promise<SandboxFileEntry>;
  /** A directory's entries, sorted by name; `omitted` counts names that are not UTF-8. */
  list(id: string, path?: string): Promise<{ entries: SandboxFileEntry[]; omitted: number }>;
  stat(id: string, path: string): Promise<SandboxFileEntry>;
  /** A file, a symlink, or a directory (a non-empty one only with `recursive`). */
  remove(id: string, path: string, options?: { recursive?: boolean }): Promise<void>;
  makeDir(id: string, path: string, options?: { parents?: boolean }): Promise<SandboxFileEntry>;
  rename(id: string, from: string, to: string): Promise<SandboxFileEntry>;
}

export function sandboxFilesOf(http: () => ApiClient): SandboxFiles {
  const url = (id: string, route: string, query?: Record<string, string>) =>
    `/v1/sessions/${encodeURIComponent(id)}/sandbox/files${route}${query ? `?${new URLSearchParams(query)}` : ''}`;
  const json = async <T>(res: Response) => (await res.json()) as T;
  const readStream = async (id: string, path: string, signal?: AbortSignal) => {
    const res = await http().send(url(id, '/content', { path }), {
      method: 'GET',
      ...(signal ? { signal } : {}),
    });
    if (!res.body) throw new Error(`No body for ${path}`);
    return res.body;
  };
  return {
    read: async (id, path, signal) => {
      const chunks: Uint8Array[] = [];
      for await (const chunk of await readStream(id, path, signal)) chunks.push(chunk);
      return Buffer.concat(chunks);
    },
    readStream,
    write: async (id, path, body, options = {}) => {
      const streamed = typeof body !== 'string' && !(body instanceof Uint8Array);
      const sent = streamed && !(body instanceof ReadableStream) ? ReadableStream.from(body) : body;
      const res = await http().send(url(id, '/content', { path, mkdirs: String(options.mkdirs ?? false) }), {
        method: 'PUT',
        headers: { 'content-type': 'application/octet-stream' },
        body: sent as RequestInit['body'],
        ...(streamed ? { duplex: 'half' } : {}),
      });
      return json<SandboxFileEntry>(res);
    },
    list: async (id, path = '') => json(await http().send(url(id, '', { path }), { method: 'GET' })),
    stat: async (id, path) => json(await http().send(url(id, '/stat', { path }), { method: 'GET' })),
    remove: async (id, path, options = {}) => {
      await http().send(url(id, '', { path, recursive: String(options.recursive ?? false) }), {
        method: 'DELETE',
      });
    },
    makeDir: async (id, path, options = {}) =>
      json(
        await http().send(url(id, '/mkdir'), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ path, ...(options.parents ? { parents: true } : {}) }),
        }),
      ),
    rename: async (id, from, to) =>
      json(
        await http().send(url(id, '/rename'), {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ from, to }),
        }),
      ),
  };
}
