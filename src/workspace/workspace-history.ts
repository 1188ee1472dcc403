/**
 * Reading a session's workspace history from its chain in the blob store: the tree of any
 * retained version (listed, a file read), and what one commit changed (its diff).
 *
 * A version's tree is built in memory from the chain's objects (the newest snapshot, then
 * the layers up to that version), from their indices (archive-index.ts), or headers only
 * for an object written before indices: no file of it is written anywhere, so any process
 * that reaches the blob store (the API, on any machine) can read history, and a worker's
 * copy of the workspace is never touched. A file's content is read out of the one object
 * that last wrote it, by a ranged get when the object is indexed.
 *
 * A diff is read from the commit's own layer (what it wrote and deleted) against the tree
 * of the version before it, keeping only the paths that layer touches: the added, changed
 * and deleted files (contents read only for these), renames where a deleted file's content reappears under a new path
 * (same SHA-256), text diffs for text files and sizes for the rest. It is bounded: content
 * is kept only for files up to `maxTextFileBytes`, and text diffs only up to
 * `maxPatchBytes` in all; past either a file shows its sizes and `truncated`.
 *
 * Retained versions: those from the oldest snapshot the store still names (or 0 when there
 * is none) to the session's current one. Compaction drops the objects before its snapshot,
 * so an older tree, and the diff of the commit that made the snapshot's version, can no
 * longer be read: asking for them is VERSION_NOT_RETAINED, naming the versions that are. A
 * rewind's snapshot (the objects of an older tree, named again) drops nothing; its version's
 * diff is the tree it went back to against the tree before it.
 */
import { createHash, type Hash, randomBytes } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { BlobStore } from '../blobs/index.js';
import {
  BerthError,
  type ChainEntry,
  type FileChange,
  type FileSide,
  notRetainedError,
  objectsOfVersion,
  type RetainedVersions,
  retainedVersions,
  type TreeEntryInfo,
  type TreeEntryType,
  type TurnDiff,
  unifiedDiff,
  type WorkspaceChain,
  type WorkspaceObjectRef,
  type WorkspacePathInfo,
} from '../core/index.js';
import {
  type ArchiveIndex,
  type IndexedEntry,
  readArchiveIndex,
  readIndexedBytes,
  readIndexedContent,
} from './archive-index.js';
import {
  type EntryTarget,
  type FileEntry,
  type FileSink,
  type LayerEntry,
  packEmptyTree,
  readLayerArchive,
} from './layer-archive.js';

/** An entry of a tree listed from indices; a file's with the object and offset of its content. */
export interface IndexedItem {
  entry: IndexedEntry;
  at?: { key: string; indexed?: { archive: ArchiveIndex; o: number } };
}

export interface HistoryLimits {
  /** A file larger than this (either side) gets no text diff, only its sizes. @default 1 MiB */
  maxTextFileBytes: number;
  /** Text diffs of one commit, in all; the files after are listed with sizes only. @default 2 MiB */
  maxPatchBytes: number;
  /** File contents one diff holds in memory (both sides); past it files show sizes only. @default 64 MiB */
  maxKeptBytes: number;
}

export const DEFAULT_HISTORY_LIMITS: HistoryLimits = {
  maxTextFileBytes: 1024 * 1024,
  maxPatchBytes: 2 * 1024 * 1024,
  maxKeptBytes: 64 * 1024 * 1024,
};

/** Bytes of a file's start read to tell text from binary when its content is not kept. */
const SNIFF_BYTES = 8000;

interface Node {
  type: TreeEntryType;
  mode: number;
  size: number;
  mtimeMs: number;
  target?: string;
  /**
   * Where a file's content is: the object and the entry's position in it, and when the
   * object has an index, the index and the content's offset (read by a ranged get).
   */
  at?: { key: string; index: number; indexed?: { archive: ArchiveIndex; o: number } };
  children?: Map<string, Node>;
  /** The entry that put it there, when it came from an index (its owner, for a writer of the tree). */
  indexed?: IndexedEntry;
  /** Captured for a diff: the content's hash, its first bytes, and all of it when small. */
  sha256?: string;
  head?: Buffer;
  content?: Buffer;
}

/** Trees kept for reads, newest used last: browsing a version costs one build, not one per request. */
const CACHED_TREES = 4;
/** Archive indices kept (an object's never changes): a diff or a tree reads each once. */
const CACHED_INDICES = 64;

export class WorkspaceHistory {
  /**
   * Built trees by the keys of the objects that make them. Objects are immutable and their
   * keys never reused, so a tree is never stale; only reads use these (a diff changes its tree).
   */
  private readonly trees = new Map<string, Promise<Node>>();
  private readonly indices = new Map<string, Promise<ArchiveIndex | null>>();

  constructor(
    private readonly blobs: BlobStore,
    private readonly limits: HistoryLimits = DEFAULT_HISTORY_LIMITS,
  ) {}

  /**
   * What a path is at a retained version ('' = the workspace's root): a directory with its
   * entries, a link, or a file with its content streamed out of the object that last wrote it.
   */
  async read(
    chain: WorkspaceChain,
    version: number,
    path: string,
    resident = false,
  ): Promise<{ info: WorkspacePathInfo; body: Readable | null }> {
    assertRetained(chain, version, resident, 'read');
    const node = lookup(await this.cachedTree(chain, version), path);
    if (!node)
      throw new BerthError(
        'WORKSPACE_PATH_NOT_FOUND',
        `Path ${path} is not in the workspace of session ${chain.sessionId} at version ${version}`,
      );
    switch (node.type) {
      case 'dir':
        return { info: { type: 'dir', path, version, entries: listingOf(node) }, body: null };
      case 'link':
        return { info: { type: 'link', path, version, target: node.target! }, body: null };
      case 'file':
        return {
          info: { type: 'file', path, version, size: node.size, mode: node.mode, mtimeMs: node.mtimeMs },
          body: this.contentOf(node),
        };
    }
  }

  /** What the commit that made `version` changed, from its layer and the tree before it. */
  async diff(chain: WorkspaceChain, version: number, resident = false): Promise<TurnDiff> {
    const retained = assertRetained(chain, version, resident, 'diff');
    if (version <= retained.oldest)
      throw notRetained(
        chain,
        version,
        retained,
        `its layer was compacted into the snapshot of version ${retained.oldest}`,
      );
    const rows = chain.history ?? chain.entries;
    const keep: KeepBudget = { fileBytes: this.limits.maxTextFileBytes, leftBytes: this.limits.maxKeptBytes };
    if (rows.some((e) => e.version === version && e.rewoundTo !== undefined)) {
      // A rewind wrote no layer: its diff is the tree it went back to against the one before it.
      const everything = { covers: () => true, keep };
      const before = filesOf(await this.treeAt(chain, version - 1, everything));
      const after = filesOf(await this.treeAt(chain, version, everything));
      return this.render(version, before, after, keep);
    }
    const layer = rows.find((e) => e.kind === 'layer' && e.version === version);
    const empty: TurnDiff = { version, files: [], truncated: false, counts: countsOf([]) };
    if (!layer) return empty; // the commit changed no file
    const recorded = await this.recordLayer(layer, keep);
    const touched = touchedPaths(recorded);
    const root = await this.treeAt(chain, version - 1, { covers: (path) => touched.covers(path), keep });
    const before = new Map<string, Node>();
    for (const { entry } of recorded) collectChanged(root, entry, before);
    const replay = new TreeBuilder(root, layer.key);
    for (const r of recorded) replay.put(r.entry, r.node);
    const after = new Map<string, Node>();
    for (const { entry } of recorded) collectChanged(root, entry, after);
    return this.render(version, before, after, keep);
  }

  /**
   * The tree of `version` from its objects' indices, parents before children, each entry
   * with where its content is; null when one of its objects has no index (or the version
   * is not retained). For a machine that brings its copy to another version of the same
   * chain by writing only what differs.
   */
  async indexedTree(chain: WorkspaceChain, version: number): Promise<Map<string, IndexedItem> | null> {
    const objects = objectsOfVersion(chain, version);
    if (!objects || (await Promise.all(objects.map((o) => this.indexOf(o)))).includes(null)) return null;
    const items = new Map<string, IndexedItem>();
    const walk = (dir: Node): void => {
      for (const child of dir.children!.values()) {
        const entry =
          child.type === 'file' ? child.at!.indexed!.archive.entries[child.at!.index]! : child.indexed;
        if (!entry) continue; // a dir no entry named (an archive lists a file's dirs first)
        items.set(entry.p, { entry, ...(child.type === 'file' ? { at: child.at! } : {}) });
        if (child.type === 'dir') walk(child);
      }
    };
    walk(await this.treeAt(chain, version));
    return items;
  }

  /** The entries of the objects, from their indices; null when one has none. */
  async entriesOf(objects: ChainEntry[]): Promise<IndexedEntry[] | null> {
    const indices = await Promise.all(objects.map((o) => this.indexOf(o)));
    return indices.includes(null) ? null : indices.flatMap((i) => i!.entries);
  }

  /**
   * An object holding an empty tree, for a rewind to a version whose workspace was empty (a
   * version's snapshot names at least one object). A few dozen bytes, new on every call,
   * like every upload: garbage collection never takes it from under the rewind about to name it.
   */
  async emptyTree(): Promise<WorkspaceObjectRef> {
    const chunks: Buffer[] = [];
    for await (const chunk of packEmptyTree()) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const sha256 = createHash('sha256').update(body).digest('hex');
    const key = `snapshots/${sha256}.${randomBytes(8).toString('hex')}`;
    await this.blobs.put(key, [body], { maxBytes: body.length, expectedSha256: sha256, ifAbsent: true });
    return { key, size: body.length };
  }

  private cachedTree(chain: WorkspaceChain, version: number): Promise<Node> {
    const key = objectsUpTo(chain, version)
      .map((e) => e.key)
      .join('\n');
    let tree = this.trees.get(key);
    if (tree) this.trees.delete(key);
    else {
      tree = this.treeAt(chain, version);
      tree.catch(() => this.trees.delete(key));
    }
    this.trees.set(key, tree);
    for (const oldest of this.trees.keys()) {
      if (this.trees.size <= CACHED_TREES) break;
      this.trees.delete(oldest);
    }
    return tree;
  }

  /** The tree of `version`: the chain's snapshot and layers up to it, applied in memory. */
  private async treeAt(
    chain: WorkspaceChain,
    version: number,
    capture?: { covers(path: string): boolean; keep: KeepBudget },
  ): Promise<Node> {
    const root: Node = { type: 'dir', mode: 0o755, size: 0, mtimeMs: 0, children: new Map() };
    const objects = objectsUpTo(chain, version);
    const indices = await Promise.all(objects.map((o) => this.indexOf(o)));
    for (const [i, entry] of objects.entries()) {
      const builder = new TreeBuilder(root, entry.key, capture);
      const archive = indices[i];
      // Indexed: the tree from the index alone; contents a diff needs are read later, by range.
      if (archive) builder.putIndexed(archive);
      else await readLayerArchive((await this.blobs.get(entry.key)).body, builder);
    }
    return root;
  }

  /** The object's index (null: written before indices), read once. */
  private indexOf(entry: ChainEntry): Promise<ArchiveIndex | null> {
    let index = this.indices.get(entry.key);
    if (index) this.indices.delete(entry.key);
    else {
      index = readArchiveIndex(this.blobs, entry.key, entry.size);
      index.catch(() => this.indices.delete(entry.key));
    }
    this.indices.set(entry.key, index);
    for (const oldest of this.indices.keys()) {
      if (this.indices.size <= CACHED_INDICES) break;
      this.indices.delete(oldest);
    }
    return index;
  }

  /** A file's bytes: by a ranged get when its object is indexed, else read up to its entry. */
  private contentOf(node: Node): Readable {
    const { key, index, indexed } = node.at!;
    return indexed
      ? readIndexedContent(this.blobs, key, indexed.archive, indexed.o, node.size)
      : this.entryContent(key, index);
  }

  /**
   * The content a diff shows, for files whose tree came from an index: all of it when the
   * budget allows, else its first bytes (to tell text from binary). Captured files have it.
   */
  private async fill(nodes: Node[], keep: KeepBudget): Promise<void> {
    const byObject = new Map<string, { archive: ArchiveIndex; nodes: Node[] }>();
    for (const n of nodes) {
      const indexed = n.type === 'file' && !n.head ? n.at?.indexed : undefined;
      if (!indexed) continue;
      const group = byObject.get(n.at!.key) ?? { archive: indexed.archive, nodes: [] };
      if (!group.nodes.includes(n)) group.nodes.push(n);
      byObject.set(n.at!.key, group);
    }
    await Promise.all(
      [...byObject].map(async ([key, { archive, nodes: group }]) => {
        const whole = group.map((n) => {
          const kept = n.size <= keep.fileBytes && n.size <= keep.leftBytes;
          if (kept) keep.leftBytes -= n.size;
          return kept;
        });
        const wants = group.map((n, i) => ({
          o: n.at!.indexed!.o,
          length: whole[i] ? n.size : Math.min(n.size, SNIFF_BYTES),
        }));
        const contents = await readIndexedBytes(this.blobs, key, archive, wants);
        group.forEach((n, i) => {
          n.head = contents[i]!.subarray(0, SNIFF_BYTES);
          if (whole[i]) n.content = contents[i]!;
        });
      }),
    );
  }

  /** Every entry of one layer, each file's content hashed and, when small, kept. */
  private async recordLayer(
    layer: ChainEntry,
    keep: KeepBudget,
  ): Promise<{ entry: LayerEntry; node: Node | null }[]> {
    const archive = await this.indexOf(layer);
    // Indexed: hashes from the index, contents read later for the files the diff shows.
    if (archive)
      return archive.entries.map((entry, index) => ({
        entry,
        node: entry.t === 'file' ? indexedNode(layer.key, archive, index, entry) : null,
      }));
    const recorded: { entry: LayerEntry; node: Node | null }[] = [];
    let index = 0;
    const target: EntryTarget = {
      apply: async (entry) => {
        index++;
        recorded.push({ entry, node: null });
      },
      startFile: async (entry) => {
        const node = fileNode(entry, { key: layer.key, index: index++ });
        recorded.push({ entry, node });
        return capturing(node, keep);
      },
    };
    await readLayerArchive((await this.blobs.get(layer.key)).body, target);
    return recorded;
  }

  private async render(
    version: number,
    before: Map<string, Node>,
    after: Map<string, Node>,
    keep: KeepBudget,
  ): Promise<TurnDiff> {
    const changes: {
      path: string;
      change: FileChange['change'];
      from?: string;
      a: Node | null;
      b: Node | null;
    }[] = [];
    for (const [path, a] of before) {
      const b = after.get(path);
      if (!b || b.type !== a.type) changes.push({ path, change: 'deleted', a, b: null });
      else if (!sameContent(a, b)) changes.push({ path, change: 'modified', a, b });
    }
    for (const [path, b] of after) {
      const a = before.get(path);
      if (!a || a.type !== b.type) changes.push({ path, change: 'added', a: null, b });
    }
    pairRenames(changes);
    await this.fill(
      changes.flatMap((c) => [c.a, c.b].filter((n): n is Node => n !== null)),
      keep,
    );
    changes.sort((x, y) => (x.path < y.path ? -1 : x.path > y.path ? 1 : 0));
    let patchBytes = 0;
    let truncated = false;
    const files = changes.map(({ path, change, from, a, b }): FileChange => {
      const binary = [a, b].some((n) => n?.type === 'file' && isBinary(n));
      const file: FileChange = {
        path,
        change,
        ...(from === undefined ? {} : { from }),
        before: sideOf(a),
        after: sideOf(b),
        binary,
      };
      if (binary || [a, b].some((n) => n?.type === 'link')) return file;
      // Same content (a rename, a mode change): nothing to show, whatever its size.
      if (a?.sha256 !== undefined && a.sha256 === b?.sha256) return { ...file, diff: '' };
      const textA = a ? a.content : Buffer.alloc(0);
      const textB = b ? b.content : Buffer.alloc(0);
      if (!textA || !textB || patchBytes >= this.limits.maxPatchBytes) {
        truncated = true;
        return { ...file, truncated: true };
      }
      const diff = unifiedDiff(textA.toString('utf8'), textB.toString('utf8'));
      patchBytes += Buffer.byteLength(diff);
      return { ...file, diff };
    });
    return { version, files, truncated, counts: countsOf(files) };
  }

  /** One file entry's bytes from one object, read up to it and no further. */
  private entryContent(key: string, index: number): Readable {
    const out = new PassThrough();
    const stop = new Error('entry read');
    let seen = 0;
    const target: EntryTarget = {
      apply: async () => {
        seen++;
      },
      startFile: async () => {
        if (seen++ !== index) return DISCARD;
        return {
          write: async (bytes) => {
            if (out.destroyed) throw stop; // the reader went away
            if (!out.write(bytes))
              await new Promise<void>((resolve) => {
                out.once('drain', resolve);
                out.once('close', resolve);
              });
          },
          close: async () => {
            out.end();
            throw stop;
          },
        };
      },
    };
    void (async () => readLayerArchive((await this.blobs.get(key)).body, target))().then(
      () => out.destroy(new BerthError('WORKSPACE_FAILED', `Object ${key} ended before entry ${index}`)),
      (err: unknown) => {
        if (err !== stop) out.destroy(err as Error);
      },
    );
    return out;
  }
}

/** The chain's objects that make `version`: its snapshot (if any) and the layers after it up to `version`. */
function objectsUpTo(chain: WorkspaceChain, version: number): ChainEntry[] {
  return objectsOfVersion(chain, version) ?? [];
}

function assertRetained(
  chain: WorkspaceChain,
  version: number,
  resident: boolean,
  what: 'read' | 'diff',
): RetainedVersions {
  const retained = retainedVersions(chain, resident);
  if (!retained)
    throw new BerthError(
      'VERSION_NOT_RETAINED',
      `Session ${chain.sessionId} keeps no workspace history: its resident agent writes the workspace in place, with no chain of versions (${what} of version ${version})`,
    );
  if (!Number.isSafeInteger(version) || version < 0 || version > retained.newest)
    throw new BerthError(
      'INVALID_INPUT',
      `Session ${chain.sessionId} has reached workspace version ${retained.newest}; there is no version ${version}`,
    );
  if (version < retained.oldest)
    throw notRetained(
      chain,
      version,
      retained,
      `it was compacted into the snapshot of version ${retained.oldest}`,
    );
  return retained;
}

function notRetained(chain: WorkspaceChain, version: number, r: RetainedVersions, why: string): BerthError {
  return notRetainedError(chain.sessionId, version, r, why);
}

function listingOf(dir: Node): TreeEntryInfo[] {
  return [...dir.children!.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, n]) => ({
      name,
      type: n.type,
      size: n.type === 'file' ? n.size : 0,
      mode: n.mode,
      ...(n.target === undefined ? {} : { target: n.target }),
      ...(n.type === 'file' ? { mtimeMs: n.mtimeMs } : {}),
    }));
}

function lookup(root: Node, path: string): Node | null {
  let node: Node | undefined = root;
  for (const part of splitPath(path)) {
    node = node?.children?.get(part);
    if (!node) return null;
  }
  return node;
}

function splitPath(path: string): string[] {
  return path.split('/').filter((p) => p !== '' && p !== '.');
}

function fileNode(entry: FileEntry, at: NonNullable<Node['at']>): Node {
  return { type: 'file', mode: entry.m, size: entry.s, mtimeMs: entry.mt, at };
}

/** A file of an indexed object: its hash from the index, its content read by range when needed. */
function indexedNode(
  key: string,
  archive: ArchiveIndex,
  index: number,
  entry: Extract<IndexedEntry, { t: 'file' }>,
): Node {
  return { ...fileNode(entry, { key, index, indexed: { archive, o: entry.o } }), sha256: entry.h };
}

/** How much content a diff may hold: per file, and left of its total. */
interface KeepBudget {
  fileBytes: number;
  leftBytes: number;
}

/** A sink that hashes the content, keeps its first bytes, and keeps all of it when the budget allows. */
function capturing(node: Node, budget: KeepBudget): FileSink {
  const hash: Hash = createHash('sha256');
  const chunks: Buffer[] = [];
  let held = 0;
  const keep = node.size <= budget.fileBytes && node.size <= budget.leftBytes;
  if (keep) budget.leftBytes -= node.size;
  return {
    write: async (bytes) => {
      hash.update(bytes);
      if (keep || held < SNIFF_BYTES) {
        chunks.push(Buffer.from(bytes));
        held += bytes.length;
      }
    },
    close: async () => {
      node.sha256 = hash.digest('hex');
      const all = Buffer.concat(chunks);
      node.head = all.subarray(0, SNIFF_BYTES);
      if (keep) node.content = all;
    },
  };
}

const DISCARD: FileSink = { write: async () => {}, close: async () => {} };

/**
 * Applies one object's entries to an in-memory tree, in archive order, as applying it to
 * disk would: a delete drops the path and all under it, a file or link replaces whatever
 * was there, a dir keeps the children of a dir already there.
 */
class TreeBuilder implements EntryTarget {
  private index = 0;

  constructor(
    private readonly root: Node,
    private readonly key: string,
    /** Files whose content a diff needs: hashed, and kept as the budget allows. */
    private readonly capture?: { covers(path: string): boolean; keep: KeepBudget },
  ) {}

  async apply(entry: Exclude<LayerEntry, { t: 'file' }>): Promise<void> {
    this.index++;
    this.put(entry, null);
  }

  async startFile(entry: FileEntry): Promise<FileSink> {
    const node = fileNode(entry, { key: this.key, index: this.index++ });
    this.put(entry, node);
    return this.capture?.covers(entry.p) ? capturing(node, this.capture.keep) : DISCARD;
  }

  /** Every entry of an indexed object, applied from its index: no content read. */
  putIndexed(archive: ArchiveIndex): void {
    for (const [index, entry] of archive.entries.entries()) {
      this.put(entry, entry.t === 'file' ? indexedNode(this.key, archive, index, entry) : null);
      if (entry.t === 'dir' || entry.t === 'link') lookup(this.root, entry.p)!.indexed = entry;
    }
  }

  /** The entry applied; for a file, `node` is the file's (built by whoever read its content). */
  put(entry: LayerEntry, node: Node | null): void {
    const parts = splitPath(entry.p);
    const name = parts.pop()!;
    const parent = this.dirOf(parts, entry.p);
    const existing = parent.get(name);
    switch (entry.t) {
      case 'delete':
        parent.delete(name);
        return;
      case 'dir':
        if (existing?.type === 'dir') {
          existing.mode = entry.m;
          return;
        }
        parent.set(name, { type: 'dir', mode: entry.m, size: 0, mtimeMs: 0, children: new Map() });
        return;
      case 'link':
        parent.set(name, { type: 'link', mode: 0o777, size: 0, mtimeMs: 0, target: entry.to });
        return;
      case 'file':
        parent.set(name, node!);
        return;
    }
  }

  private dirOf(parts: string[], path: string): Map<string, Node> {
    let node = this.root;
    for (const part of parts) {
      const next = node.children!.get(part);
      if (next?.type !== 'dir')
        throw new BerthError(
          'WORKSPACE_FAILED',
          `Workspace layer archive ${this.key} is corrupt: ${path} does not lie in a directory`,
        );
      node = next;
    }
    return node.children!;
  }
}

/** The paths one layer's entries touch: a dir's own path, and everything at or under any other entry's path. */
function touchedPaths(recorded: { entry: LayerEntry }[]): { covers(path: string): boolean } {
  const subtrees = new Set<string>();
  const exact = new Set<string>();
  for (const { entry } of recorded) (entry.t === 'dir' ? exact : subtrees).add(entry.p);
  return {
    covers(path) {
      if (exact.has(path)) return true;
      for (let p = path; ; ) {
        if (subtrees.has(p)) return true;
        const slash = p.lastIndexOf('/');
        if (slash < 0) return false;
        p = p.slice(0, slash);
      }
    },
  };
}

/** The files and links at or under the entry's path (a dir entry: only a non-dir at its path) into `into`. */
function collectChanged(root: Node, entry: LayerEntry, into: Map<string, Node>): void {
  const node = lookup(root, entry.p);
  if (!node || (entry.t === 'dir' && node.type === 'dir')) return;
  const walk = (path: string, n: Node): void => {
    if (n.type !== 'dir') into.set(path, n);
    else for (const [name, child] of n.children!) walk(`${path}/${name}`, child);
  };
  walk(entry.p, node);
}

/** Every file and link of a tree, by path. */
function filesOf(root: Node): Map<string, Node> {
  const files = new Map<string, Node>();
  const walk = (prefix: string, dir: Node): void => {
    for (const [name, child] of dir.children!) {
      const path = prefix ? `${prefix}/${name}` : name;
      if (child.type === 'dir') walk(path, child);
      else files.set(path, child);
    }
  };
  walk('', root);
  return files;
}

function sameContent(a: Node, b: Node): boolean {
  if (a.type === 'link') return a.target === b.target;
  return a.sha256 !== undefined && a.sha256 === b.sha256 && a.mode === b.mode;
}

/** A deleted file whose content an added file has (same SHA-256, not empty) was renamed: one pair per content. */
function pairRenames(
  changes: { path: string; change: FileChange['change']; from?: string; a: Node | null; b: Node | null }[],
): void {
  const deleted = new Map<string, number[]>();
  changes.forEach((c, i) => {
    if (c.change === 'deleted' && c.a?.type === 'file' && c.a.size > 0 && c.a.sha256) {
      const list = deleted.get(c.a.sha256) ?? [];
      list.push(i);
      deleted.set(c.a.sha256, list);
    }
  });
  const dropped = new Set<number>();
  for (const c of changes) {
    if (c.change !== 'added' || c.b?.type !== 'file' || !c.b.sha256) continue;
    const i = deleted.get(c.b.sha256)?.shift();
    if (i === undefined) continue;
    c.change = 'renamed';
    c.from = changes[i]!.path;
    c.a = changes[i]!.a;
    dropped.add(i);
  }
  for (const i of [...dropped].sort((x, y) => y - x)) changes.splice(i, 1);
}

function sideOf(n: Node | null): FileSide | null {
  if (!n || n.type === 'dir') return null;
  if (n.type === 'link') return { type: 'link', size: 0, mode: n.mode, target: n.target! };
  return { type: 'file', size: n.size, mode: n.mode, ...(n.sha256 ? { sha256: n.sha256 } : {}) };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Not text: a NUL byte in its start, or (when all of it is kept) not valid UTF-8. */
function isBinary(n: Node): boolean {
  const sample = n.content ?? n.head;
  if (!sample) return false;
  if (sample.subarray(0, SNIFF_BYTES).includes(0)) return true;
  if (!n.content) return false;
  try {
    utf8.decode(n.content);
    return false;
  } catch {
    return true;
  }
}

function countsOf(files: { change: FileChange['change'] }[]): TurnDiff['counts'] {
  const counts = { added: 0, modified: 0, deleted: 0, renamed: 0 };
  for (const f of files) counts[f.change]++;
  return counts;
}
