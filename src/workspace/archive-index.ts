/**
 * An archive's index, so a reader of history lists an object's tree without inflating it
 * and reads one file's bytes with a ranged get of the blob store.
 *
 * Writing (`MemberWriter`): the archive's gzip stream is cut into members (each a whole
 * gzip; concatenated, they inflate as one stream, so every reader of the archive takes it
 * unchanged): before a file whose header starts once the member holds MEMBER_MIN_BYTES, and
 * whenever it holds MEMBER_MAX_BYTES. After the archive's `end` line come the index magic
 * line, one JSON line `{members, entries}`, and a fixed-size footer member giving where the
 * index member starts and its length. `members` are the [compressed, uncompressed] offsets
 * where each member starts (the last: where the index starts); `entries` are the archive's
 * entries in order, a file's with its content's SHA-256 (`h`) and uncompressed offset (`o`).
 *
 * Reading (`readArchiveIndex`, `readIndexedContent`): the footer by a ranged get of the
 * object's last bytes, then the index, then a file's members. An object written before
 * indices (or a checkpoint packed in memory) has none: null, and the caller inflates it.
 */
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { createGunzip, gunzip, gunzipSync, gzip, gzipSync, type ZlibOptions } from 'node:zlib';
import type { BlobStore } from '../blobs/index.js';
import { BerthError } from '../core/index.js';

const gzipAsync = promisify(gzip) as (buffer: Buffer, options: ZlibOptions) => Promise<Buffer>;
const gunzipAsync = promisify(gunzip) as (buffer: Buffer, options?: ZlibOptions) => Promise<Buffer>;
/** Runs of wanted members this close are read as one: a get costs more than inflating this much. */
const GAP_BYTES = 1 << 20;
/** Inflated in chunks this large: each is one job on the thread pool (the default, 16 KiB, makes thousands). */
const INFLATE_CHUNK_BYTES = 1 << 20;

/** The line after an archive's `end` that starts its index; a reader of entries stops there. */
export const INDEX_MAGIC = 'berth-index 1';
/** A member is cut before a file's header once it holds this much: small files share one. */
const MEMBER_MIN_BYTES = 64 * 1024;
/** And within a large file's content: a ranged read inflates at most this much more than it needs. */
const MEMBER_MAX_BYTES = 1024 * 1024;
const FOOTER_DIGITS = 15;
const footerLine = (at: number, length: number) =>
  `berth-index-at ${String(at).padStart(FOOTER_DIGITS, '0')} ${String(length).padStart(FOOTER_DIGITS, '0')}\n`;
const FOOTER_PATTERN = /^berth-index-at (\d+) (\d+)\n$/;
/** Stored, not deflated: a footer's size is the same for every archive. */
const FOOTER_OPTIONS: ZlibOptions = { level: 0 };
const FOOTER_BYTES = gzipSync(footerLine(0, 0), FOOTER_OPTIONS).length;

/** An archive entry as its index lists it: a file's with its content's hash and offset. */
export type IndexedEntry =
  | { t: 'delete'; p: string }
  | { t: 'dir'; p: string; m: number; u: number; g: number }
  | { t: 'file'; p: string; m: number; u: number; g: number; s: number; mt: number; h: string; o: number }
  | { t: 'link'; p: string; to: string; u: number; g: number };

export interface ArchiveIndex {
  /** [compressed, uncompressed] offset where each member starts; the last, where the index starts. */
  members: [number, number][];
  entries: IndexedEntry[];
}

/** Gzip members as the archive's bytes come, and the offsets an index needs. */
export class MemberWriter {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  private compressed = 0;
  private uncompressed = 0;
  private readonly members: [number, number][] = [];

  constructor(private readonly options: ZlibOptions) {}

  /** Uncompressed offset of the next byte added. */
  get offset(): number {
    return this.uncompressed + this.pendingBytes;
  }

  /** Before a file's header: a new member when this one holds enough already. */
  async *beforeFile(): AsyncGenerator<Buffer> {
    if (this.pendingBytes >= MEMBER_MIN_BYTES) yield* this.cut();
  }

  async *add(bytes: Buffer): AsyncGenerator<Buffer> {
    this.pending.push(bytes);
    this.pendingBytes += bytes.length;
    if (this.pendingBytes >= MEMBER_MAX_BYTES) yield* this.cut();
  }

  /** The last member, then the index and its footer. */
  async *finish(entries: IndexedEntry[]): AsyncGenerator<Buffer> {
    yield* this.cut();
    this.members.push([this.compressed, this.uncompressed]);
    const index: ArchiveIndex = { members: this.members, entries };
    const body = await gzipAsync(Buffer.from(`${INDEX_MAGIC}\n${JSON.stringify(index)}\n`), this.options);
    yield body;
    yield gzipSync(footerLine(this.compressed, body.length), FOOTER_OPTIONS);
  }

  private async *cut(): AsyncGenerator<Buffer> {
    if (this.pendingBytes === 0) return;
    const member = await gzipAsync(
      this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending),
      this.options,
    );
    this.members.push([this.compressed, this.uncompressed]);
    this.compressed += member.length;
    this.uncompressed += this.pendingBytes;
    this.pending = [];
    this.pendingBytes = 0;
    yield member;
  }
}

/** The index of the object `key` of `size` bytes; null when it has none (written before indices). */
export async function readArchiveIndex(
  blobs: BlobStore,
  key: string,
  size: number,
): Promise<ArchiveIndex | null> {
  if (size < FOOTER_BYTES) return null;
  const tail = await bytesOf(blobs, key, size - FOOTER_BYTES, size - 1);
  const footer = await gunzipAsync(tail).catch(() => null);
  const at = footer && FOOTER_PATTERN.exec(footer.toString('latin1'));
  if (!at) return null;
  const start = Number(at[1]);
  const text = (await gunzipAsync(await bytesOf(blobs, key, start, start + Number(at[2]) - 1))).toString(
    'utf8',
  );
  const newline = text.indexOf('\n');
  if (text.slice(0, newline) !== INDEX_MAGIC) return null;
  return JSON.parse(text.slice(newline + 1)) as ArchiveIndex;
}

/** The compressed bytes holding `length` bytes at uncompressed offset `o`, and where their inflated bytes start. */
function membersOf(
  index: ArchiveIndex,
  o: number,
  length: number,
): { start: number; end: number; at: number } {
  const { members } = index;
  let first = 0;
  while (first + 1 < members.length - 1 && members[first + 1]![1] <= o) first++;
  let last = first + 1;
  while (last < members.length - 1 && members[last]![1] < o + length) last++;
  return { start: members[first]![0], end: members[last]![0] - 1, at: members[first]![1] };
}

/**
 * Files' contents (or their first bytes) in memory: each run of members that hold wanted
 * bytes (runs less than GAP_BYTES apart joined) read by one ranged get and inflated at
 * once, so files that share a member (small ones) or sit near each other cost one read.
 */
export async function readIndexedBytes(
  blobs: BlobStore,
  key: string,
  index: ArchiveIndex,
  wants: { o: number; length: number }[],
): Promise<Buffer[]> {
  const out: Buffer[] = wants.map(() => Buffer.alloc(0));
  const ranges = wants
    .map((w, i) => ({ ...membersOf(index, w.o, w.length), i }))
    .filter((r) => wants[r.i]!.length > 0)
    .sort((a, b) => a.start - b.start);
  for (let r = 0; r < ranges.length; ) {
    const run = [ranges[r]!];
    let end = ranges[r]!.end;
    for (r++; r < ranges.length && ranges[r]!.start <= end + 1 + GAP_BYTES; r++) {
      run.push(ranges[r]!);
      end = Math.max(end, ranges[r]!.end);
    }
    const inflated = await gunzipAsync(await bytesOf(blobs, key, run[0]!.start, end), {
      chunkSize: INFLATE_CHUNK_BYTES,
    });
    for (const { i } of run) {
      const from = wants[i]!.o - run[0]!.at;
      out[i] = inflated.subarray(from, from + wants[i]!.length);
      if (out[i]!.length !== wants[i]!.length) throw truncated(key, wants[i]!.o);
    }
  }
  return out;
}

/** The same as a stream, inflated as it is read: a file of any size. */
export function readIndexedContent(
  blobs: BlobStore,
  key: string,
  index: ArchiveIndex,
  o: number,
  length: number,
): Readable {
  return Readable.from(
    (async function* () {
      if (length === 0) return;
      const range = membersOf(index, o, length);
      const { body } = await blobs.get(key, { start: range.start, end: range.end });
      let skip = o - range.at;
      let left = length;
      const inflate = createGunzip({ chunkSize: INFLATE_CHUNK_BYTES });
      body.on('error', (err) => inflate.destroy(err));
      body.pipe(inflate);
      try {
        for await (const chunk of inflate as AsyncIterable<Buffer>) {
          const from = Math.min(skip, chunk.length);
          skip -= from;
          const take = chunk.subarray(from, from + left);
          left -= take.length;
          if (take.length > 0) yield take;
          if (left === 0) return;
        }
      } finally {
        body.destroy();
        inflate.destroy();
      }
      throw truncated(key, o);
    })(),
  );
}

function truncated(key: string, o: number): BerthError {
  return new BerthError('WORKSPACE_FAILED', `Object ${key} ended inside the file its index places at ${o}`);
}

async function bytesOf(blobs: BlobStore, key: string, start: number, end: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of (await blobs.get(key, { start, end })).body) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The archive as packed before indices (one gzip member, no index): for tests and benchmarks of the fallback. */
export function withoutIndex(archive: Buffer): Buffer {
  const bytes = gunzipSync(archive);
  const at = bytes.indexOf(`\n${INDEX_MAGIC}\n`);
  return gzipSync(at < 0 ? bytes : bytes.subarray(0, at + 1), { level: 1 });
}
