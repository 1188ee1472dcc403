/**
 * A workspace layer as one immutable object: the archive a sealed attempt layer (or a
 * whole committed tree, a snapshot) is packed into before it goes to the blob store, and
 * applied from when a machine materialises a workspace it does not hold.
 *
 * Format: gzip of a line `berth-layer 1`, then one JSON header line per entry — `delete`
 * (a whiteout: the path and all under it go), `dir`, `file` (followed by exactly `s` bytes
 * of content), `link` (a symlink) — then `{"t":"end","n":<entries>}`, so a truncated
 * archive is refused instead of half applied. Modes, owners and file mtimes are kept. A
 * packed (streamed) archive is in gzip members and ends with its index (archive-index.ts),
 * which applying skips; one built in memory (a checkpoint) has no index.
 * Sockets and FIFOs are not content and are left out.
 *
 * Invariants:
 * - Applying is idempotent and order-preserving: an archive applied twice, or again after
 *   a crash cut it short, gives the same tree; a file appears whole (temp + rename).
 * - Applying never writes outside its dir: paths are relative, without `.`/`..` segments,
 *   and an entry under a symlink is refused (a packed layer never has one; a forged one
 *   could use it to escape).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import {
  chmod,
  chown,
  type FileHandle,
  lchown,
  lstat,
  mkdir,
  open,
  readdir,
  readlink,
  rename,
  rm,
  symlink,
} from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { createGunzip, gzip, type ZlibOptions, constants as zlibConstants } from 'node:zlib';
import { BerthError } from '../core/index.js';
import { INDEX_MAGIC, type IndexedEntry, MemberWriter } from './archive-index.js';
import type { PromotionPlan } from './promotion.js';

const MAGIC = 'berth-layer 1';
const MAX_HEADER_BYTES = 64 * 1024;
const INFLATE_CHUNK_BYTES = 1 << 20;
const gzipAsync = promisify(gzip) as (buffer: Buffer, options: ZlibOptions) => Promise<Buffer>;

export type LayerEntry =
  | { t: 'delete'; p: string }
  | { t: 'dir'; p: string; m: number; u: number; g: number }
  | { t: 'file'; p: string; m: number; u: number; g: number; s: number; mt: number }
  | { t: 'link'; p: string; to: string; u: number; g: number };

export type FileEntry = Extract<LayerEntry, { t: 'file' }>;

type Header = LayerEntry | { t: 'end'; n: number };

/**
 * How an archive is compressed: `dense` (deflate level 1) for what the chain keeps, layers
 * and snapshots; `fast` (Huffman coding only, no matching) for what is short-lived and on a
 * turn's critical path, checkpoints: about 4 ms per MiB whatever the content, where level 1
 * takes 20-30 ms on a MiB that does not compress (random, already compressed) and text still
 * halves. Both are gzip: a reader takes either.
 */
export type Packing = 'dense' | 'fast';

const GZIP_OPTIONS: Record<Packing, ZlibOptions> = {
  dense: { level: 1 },
  fast: { level: 1, strategy: zlibConstants.Z_HUFFMAN_ONLY },
};

/** The sealed layer's plan, packed with the content of what it moves in from the upper dir. */
export function packLayer(plan: PromotionPlan, upperDir: string, packing: Packing = 'dense'): Readable {
  return gzipped(packing, async function* () {
    for (const step of plan.steps) {
      if (step.op === 'delete') yield { entry: { t: 'delete', p: step.path } };
      else if (step.op === 'mkdir')
        yield { entry: { t: 'dir', p: step.path, m: step.mode, u: step.uid, g: step.gid } };
      else {
        const source = join(upperDir, step.from);
        const entry = await entryOf(source, step.path);
        if (entry) yield { entry, source };
      }
    }
  });
}

/**
 * The same archive as packLayer, built in memory in one go when the plan's files hold at
 * most `maxBytes` (null otherwise: stream it): their metadata and contents read at once,
 * then one gzip call. For small, latency-bound archives (checkpoints): a stream pays a
 * thread-pool round trip per chunk and per file, which a loaded machine makes tens of ms.
 */
export async function packLayerInMemory(
  plan: PromotionPlan,
  upperDir: string,
  packing: Packing,
  maxBytes: number,
): Promise<Buffer | null> {
  const moved = plan.steps.filter((s) => s.op === 'move');
  const entries = await Promise.all(moved.map((s) => entryOf(join(upperDir, s.from), s.path)));
  const total = entries.reduce((sum, e) => sum + (e?.t === 'file' ? e.s : 0), 0);
  if (total > maxBytes) return null;
  const contents = await Promise.all(
    moved.map((s, i) => {
      const e = entries[i];
      return e?.t === 'file' && e.s > 0 ? readExactly(join(upperDir, s.from), e) : null;
    }),
  );
  const parts: Buffer[] = [Buffer.from(`${MAGIC}\n`)];
  let n = 0;
  let at = 0;
  for (const step of plan.steps) {
    let entry: LayerEntry | null;
    let content: Buffer | null = null;
    if (step.op === 'delete') entry = { t: 'delete', p: step.path };
    else if (step.op === 'mkdir') entry = { t: 'dir', p: step.path, m: step.mode, u: step.uid, g: step.gid };
    else {
      entry = entries[at] ?? null;
      content = contents[at] ?? null;
      at++;
    }
    if (!entry) continue;
    n++;
    parts.push(Buffer.from(`${JSON.stringify(entry)}\n`));
    if (content) parts.push(content);
  }
  parts.push(Buffer.from(`${JSON.stringify({ t: 'end', n })}\n`));
  return gzipAsync(Buffer.concat(parts), GZIP_OPTIONS[packing]);
}

/** Exactly the size its entry announced, as fileBytes streams it: a file that shrank is an error. */
async function readExactly(source: string, entry: FileEntry): Promise<Buffer> {
  const handle = await open(source, 'r');
  try {
    const buffer = Buffer.allocUnsafe(entry.s);
    let read = 0;
    while (read < entry.s) {
      const { bytesRead } = await handle.read(buffer, read, entry.s - read, read);
      if (bytesRead === 0) break;
      read += bytesRead;
    }
    if (read !== entry.s)
      throw new BerthError('WORKSPACE_FAILED', `File ${entry.p} changed size while its layer was packed`);
    return buffer;
  } finally {
    await handle.close();
  }
}

/** A whole tree (a snapshot of a committed workspace), parents before children. */
export function packTree(dir: string): Readable {
  return gzipped('dense', () => walk(dir, ''));
}

/** A tree with nothing in it (a rewind to a version whose workspace was empty). */
export function packEmptyTree(): Readable {
  return gzipped('dense', async function* () {});
}

/** An entry, and for a file where its content is read from. */
interface Packed {
  entry: LayerEntry;
  source?: string;
}

async function* walk(root: string, rel: string): AsyncGenerator<Packed> {
  const names = (await readdir(join(root, rel)).catch(() => [] as string[])).sort();
  for (const name of names) {
    const path = rel ? join(rel, name) : name;
    const st = await lstat(join(root, path));
    if (st.isDirectory()) {
      yield { entry: { t: 'dir', p: path, m: st.mode & 0o7777, u: st.uid, g: st.gid } };
      yield* walk(root, path);
    } else {
      const source = join(root, path);
      const entry = await entryOf(source, path);
      if (entry) yield { entry, source };
    }
  }
}

/** The entry of a non-directory on disk; null for what is not content (a socket, a FIFO, a device). */
async function entryOf(source: string, path: string): Promise<LayerEntry | null> {
  const st = await lstat(source);
  if (st.isSymbolicLink()) return { t: 'link', p: path, to: await readlink(source), u: st.uid, g: st.gid };
  if (!st.isFile()) return null;
  return { t: 'file', p: path, m: st.mode & 0o7777, u: st.uid, g: st.gid, s: st.size, mt: st.mtimeMs };
}

/**
 * The entries as archive bytes: header lines, each file's content streamed after its header,
 * in gzip members, then the archive's index (archive-index.ts).
 */
function gzipped(packing: Packing, entries: () => AsyncGenerator<Packed>): Readable {
  async function* bytes(): AsyncGenerator<Buffer> {
    const out = new MemberWriter(GZIP_OPTIONS[packing]);
    const indexed: IndexedEntry[] = [];
    yield* out.add(Buffer.from(`${MAGIC}\n`));
    for await (const { entry, source } of entries()) {
      if (entry.t !== 'file') {
        yield* out.add(Buffer.from(`${JSON.stringify(entry)}\n`));
        indexed.push(entry);
        continue;
      }
      yield* out.beforeFile();
      yield* out.add(Buffer.from(`${JSON.stringify(entry)}\n`));
      const o = out.offset;
      const hash = createHash('sha256');
      for await (const chunk of fileBytes(source!, entry)) {
        hash.update(chunk);
        yield* out.add(chunk);
      }
      indexed.push({ ...entry, h: hash.digest('hex'), o });
    }
    yield* out.add(Buffer.from(`${JSON.stringify({ t: 'end', n: indexed.length })}\n`));
    yield* out.finish(indexed);
  }
  return Readable.from(bytes());
}

/** Exactly the size the header announced: a file that changed under the packer is an error, not a corrupt archive. */
async function* fileBytes(source: string, entry: FileEntry): AsyncGenerator<Buffer> {
  let sent = 0;
  if (entry.s > 0)
    for await (const chunk of createReadStream(source, { start: 0, end: entry.s - 1 })) {
      sent += (chunk as Buffer).length;
      yield chunk as Buffer;
    }
  if (sent !== entry.s)
    throw new BerthError('WORKSPACE_FAILED', `File ${entry.p} changed size while its layer was packed`);
}

/** Applies an archive onto `dir` (created if missing); returns how many entries it applied. */
export async function applyLayerArchive(
  archive: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  dir: string,
): Promise<number> {
  await mkdir(dir, { recursive: true });
  const target = new TreeWriter(dir);
  try {
    const applied = await readLayerArchive(archive, target);
    await target.drain();
    return applied;
  } finally {
    // Nothing of this apply writes after it returns or throws.
    await target.settle();
  }
}

/**
 * Applies entries given one by one (a file's with its content) onto `dir`, as applying an
 * archive of them would: the same writer, the same guarantees.
 */
export async function applyEntries(
  entries: AsyncIterable<{ entry: LayerEntry; content?: AsyncIterable<Buffer> | Buffer[] }>,
  dir: string,
): Promise<number> {
  const target = new TreeWriter(dir);
  let applied = 0;
  try {
    for await (const { entry, content } of entries) {
      applied++;
      if (entry.t !== 'file') {
        await target.apply(entry);
        continue;
      }
      const file = await target.startFile(entry);
      for await (const bytes of content ?? []) await file.write(bytes);
      await file.close();
    }
    await target.drain();
    return applied;
  } finally {
    await target.settle();
  }
}

/** What an archive's entries are handed to, in order: a tree on disk, or a reader of history. */
export interface EntryTarget {
  apply(entry: Exclude<LayerEntry, { t: 'file' }>): Promise<void>;
  /** Where the file's content goes: exactly `entry.s` bytes are written, then it is closed. */
  startFile(entry: FileEntry): Promise<FileSink>;
}

/** Parses an archive as it streams and hands each entry to `target`; returns the entry count. A truncated or forged archive is refused. */
export async function readLayerArchive(
  archive: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  target: EntryTarget,
): Promise<number> {
  const reader = new ArchiveReader();
  // Large chunks in and out: each is one job on the thread pool, which the file writes share.
  const gunzip = createGunzip({ chunkSize: INFLATE_CHUNK_BYTES });
  const source = Readable.from(coalesced(archive, INFLATE_CHUNK_BYTES));
  source.on('error', (err) => gunzip.destroy(err));
  source.pipe(gunzip);
  try {
    for await (const chunk of gunzip) await reader.push(chunk as Buffer, target);
    return reader.finish();
  } finally {
    source.destroy();
    gunzip.destroy();
  }
}

/** The bytes as they come, in chunks of at least `bytes` (a download's are a socket read each, ~64 KiB). */
async function* coalesced(
  chunks: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  bytes: number,
): AsyncGenerator<Buffer> {
  let held: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of chunks) {
    held.push(chunk);
    size += chunk.length;
    if (size < bytes) continue;
    yield Buffer.concat(held);
    held = [];
    size = 0;
  }
  if (size > 0) yield Buffer.concat(held);
}

/** Parses the archive's bytes as they come and hands each entry (and file content) to the writer. */
class ArchiveReader {
  private buffered: Buffer = Buffer.alloc(0);
  private seenMagic = false;
  private open: { left: number; file: FileSink } | null = null;
  private entries = 0;
  private ended: number | null = null;
  /** Past the index magic: the rest is the archive's index. */
  private indexed = false;

  async push(chunk: Buffer, target: EntryTarget): Promise<void> {
    if (this.indexed) return;
    this.buffered = this.buffered.length ? Buffer.concat([this.buffered, chunk]) : chunk;
    for (;;) {
      if (this.open) {
        const take = Math.min(this.open.left, this.buffered.length);
        if (take > 0) await this.open.file.write(this.buffered.subarray(0, take));
        this.buffered = this.buffered.subarray(take);
        this.open.left -= take;
        if (this.open.left > 0) return;
        await this.open.file.close();
        this.open = null;
        continue;
      }
      const newline = this.buffered.indexOf(10);
      if (newline < 0) {
        if (this.buffered.length > MAX_HEADER_BYTES) throw corrupt('a header line is too long');
        return;
      }
      const line = this.buffered.subarray(0, newline).toString('utf8');
      this.buffered = this.buffered.subarray(newline + 1);
      if (!this.seenMagic) {
        if (line !== MAGIC) throw corrupt('it does not start with the berth-layer magic');
        this.seenMagic = true;
        continue;
      }
      if (this.ended !== null) {
        if (line !== INDEX_MAGIC) throw corrupt('bytes follow its end');
        // The index follows: for readers of history, not entries to apply.
        this.indexed = true;
        this.buffered = Buffer.alloc(0);
        return;
      }
      const header = parseHeader(line);
      if (header.t === 'end') {
        if (header.n !== this.entries)
          throw corrupt(`it ends after ${this.entries} entries, not ${header.n}`);
        this.ended = header.n;
        continue;
      }
      this.entries++;
      if (header.t === 'file') {
        const file = await target.startFile(header);
        if (header.s === 0) await file.close();
        else this.open = { left: header.s, file };
      } else await target.apply(header);
    }
  }

  finish(): number {
    if (this.ended === null || this.open || this.buffered.length > 0) throw corrupt('it is truncated');
    return this.ended;
  }
}

function parseHeader(line: string): Header {
  let h: Header;
  try {
    h = JSON.parse(line) as Header;
  } catch {
    throw corrupt('a header line is not JSON');
  }
  const known = ['delete', 'dir', 'file', 'link', 'end'];
  if (typeof h !== 'object' || h === null || !known.includes(h.t))
    throw corrupt('a header has an unknown type');
  if (h.t !== 'end') assertRelativePath(h.p);
  if (h.t === 'file' && !(Number.isSafeInteger(h.s) && h.s >= 0)) throw corrupt(`file ${h.p} has a bad size`);
  return h;
}

function assertRelativePath(path: unknown): void {
  if (
    typeof path !== 'string' ||
    path === '' ||
    path.startsWith('/') ||
    path.split('/').some((s) => s === '' || s === '.' || s === '..')
  )
    throw corrupt(`the path ${JSON.stringify(path)} is not a relative path inside the workspace`);
}

function corrupt(why: string): BerthError {
  return new BerthError('WORKSPACE_FAILED', `Workspace layer archive is corrupt: ${why}`);
}

/** Files written at once: the thread pool's and the disk's latencies overlap, and the download goes on meanwhile. */
const FILES_IN_FLIGHT = 16;
/** Content held for files being written, at most: beyond it the reader waits, and so does the download. */
const BYTES_IN_FLIGHT = 32 * 1024 * 1024;
/** A larger file is streamed to disk as it arrives, alone, rather than held whole and written beside others. */
const WHOLE_FILE_BYTES = 4 * 1024 * 1024;

/** Where a file's content goes as the archive delivers it. */
export interface FileSink {
  write(bytes: Buffer): Promise<void>;
  close(): Promise<void>;
}

/**
 * Writes entries into one dir, never through a symlink, each step idempotent. A small
 * file is held whole and written beside others; an entry that could touch a file still
 * being written (a delete, a link, a large file, a path in flight or known as a dir)
 * waits for those writes first, so the tree ends as if the entries were applied in order.
 */
class TreeWriter implements EntryTarget {
  /** Dirs under the root known to be real directories (not symlinks) during this apply. */
  private readonly realDirs = new Set<string>(['']);
  /** Files being written, by path; each promise settles (never rejects) once the file is placed or failed. */
  private readonly writing = new Map<string, Promise<void>>();
  private bytesInFlight = 0;
  private failure: { err: unknown } | null = null;
  /** The large file being streamed, to close and remove if the apply stops half way. */
  private streaming: { handle: FileHandle; tmp: string } | null = null;

  constructor(private readonly root: string) {}

  async apply(entry: Exclude<LayerEntry, { t: 'file' }>): Promise<void> {
    if (entry.t !== 'dir' || this.writing.has(entry.p)) await this.drain();
    const target = await this.placeOf(entry.p);
    switch (entry.t) {
      case 'delete':
        await rm(target, { recursive: true, force: true });
        this.forget(entry.p);
        return;
      case 'dir': {
        const st = await lstat(target).catch(() => null);
        if (st && !st.isDirectory()) await rm(target, { force: true });
        if (!st?.isDirectory()) await mkdir(target).catch(ignoreExists);
        await chown(target, entry.u, entry.g);
        await chmod(target, entry.m);
        this.realDirs.add(entry.p);
        return;
      }
      case 'link': {
        const tmp = tempNameIn(dirname(target));
        await symlink(entry.to, tmp);
        await lchown(tmp, entry.u, entry.g);
        await this.replaceWith(tmp, target, entry.p);
        return;
      }
    }
  }

  async startFile(entry: FileEntry): Promise<FileSink> {
    const whole = entry.s <= WHOLE_FILE_BYTES;
    if (!whole || this.writing.has(entry.p) || this.realDirs.has(entry.p)) await this.drain();
    const target = await this.placeOf(entry.p);
    if (!whole) return this.streamed(entry, target);
    const content: Buffer[] = [];
    return {
      write: async (bytes) => {
        content.push(bytes);
      },
      close: async () => {
        await this.room(entry.s);
        this.bytesInFlight += entry.s;
        const written = this.writeWhole(entry, target, content).then(
          () => {},
          (err: unknown) => {
            this.failure ??= { err };
          },
        );
        this.writing.set(
          entry.p,
          written.finally(() => {
            this.writing.delete(entry.p);
            this.bytesInFlight -= entry.s;
          }),
        );
      },
    };
  }

  /** Every file begun is written and in place; throws the first failure of one. */
  async drain(): Promise<void> {
    while (this.writing.size > 0) await Promise.race(this.writing.values());
    if (this.failure) throw this.failure.err;
  }

  /** Nothing of this apply is left writing, and a file streamed half way is removed. */
  async settle(): Promise<void> {
    await Promise.all(this.writing.values());
    if (this.streaming) {
      const { handle, tmp } = this.streaming;
      this.streaming = null;
      await handle.close().catch(() => {});
      await rm(tmp, { force: true });
    }
  }

  /** Waits until a file of `bytes` may join those in flight; throws the first failure of one. */
  private async room(bytes: number): Promise<void> {
    while (
      this.writing.size >= FILES_IN_FLIGHT ||
      (this.writing.size > 0 && this.bytesInFlight + bytes > BYTES_IN_FLIGHT)
    )
      await Promise.race(this.writing.values());
    if (this.failure) throw this.failure.err;
  }

  private async writeWhole(entry: FileEntry, target: string, content: Buffer[]): Promise<void> {
    const tmp = tempNameIn(dirname(target));
    const handle = await open(tmp, 'wx', 0o600);
    try {
      await handle.writeFile(content.length === 1 ? content[0]! : Buffer.concat(content));
      await this.finishFile(handle, entry);
    } catch (err) {
      await handle.close().catch(() => {});
      await rm(tmp, { force: true });
      throw err;
    }
    await this.replaceWith(tmp, target, entry.p).catch(async (err: unknown) => {
      await rm(tmp, { force: true });
      throw err;
    });
  }

  /** A large file, written as its content arrives while nothing else is in flight. */
  private async streamed(entry: FileEntry, target: string): Promise<FileSink> {
    const tmp = tempNameIn(dirname(target));
    const handle = await open(tmp, 'wx', 0o600);
    this.streaming = { handle, tmp };
    return {
      write: async (bytes) => {
        await handle.writeFile(bytes);
      },
      close: async () => {
        await this.finishFile(handle, entry);
        this.streaming = null;
        await this.replaceWith(tmp, target, entry.p);
      },
    };
  }

  /** Owner, mode and times, then closed: the file is complete before it is renamed into place. */
  private async finishFile(handle: FileHandle, entry: FileEntry): Promise<void> {
    await handle.chown(entry.u, entry.g);
    await handle.chmod(entry.m);
    await handle.utimes(new Date(entry.mt), new Date(entry.mt));
    await handle.close();
  }

  /** Renames a finished temp over the target, replacing a directory that was there. */
  private async replaceWith(tmp: string, target: string, rel: string): Promise<void> {
    await rename(tmp, target).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'EISDIR') throw err;
      await rm(target, { recursive: true, force: true });
      await rename(tmp, target);
    });
    this.forget(rel);
  }

  /** The absolute path of `rel`, after checking every parent is a real directory of this tree. */
  private async placeOf(rel: string): Promise<string> {
    const parts = rel.split('/');
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/');
      if (this.realDirs.has(parent)) continue;
      const st = await lstat(join(this.root, parent)).catch(() => null);
      if (!st) throw corrupt(`${rel} comes before its directory ${parent}`);
      if (!st.isDirectory()) throw corrupt(`${rel} lies under ${parent}, which is not a directory`);
      this.realDirs.add(parent);
    }
    return join(this.root, rel);
  }

  private forget(rel: string): void {
    for (const known of this.realDirs)
      if (known === rel || known.startsWith(`${rel}/`)) this.realDirs.delete(known);
  }
}

function tempNameIn(dir: string): string {
  return join(dir, `.berth-apply-${randomBytes(6).toString('hex')}`);
}

function ignoreExists(err: NodeJS.ErrnoException): void {
  if (err.code !== 'EEXIST') throw err;
}
