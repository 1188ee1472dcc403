/**
 * Line diffs in unified format (`diff -u`), for showing what a turn changed in a text file.
 *
 * Myers' O((N+M)·D) greedy algorithm on the lines left after trimming the common prefix
 * and suffix (where most edits of real files end). Its cost grows with D, the number of
 * lines that differ: past `maxEdits` it stops searching and reports the middle as one
 * replaced block, still a correct diff (applying it gives the new text), only not a
 * minimal one, so a rewritten file never costs quadratic time.
 *
 * Pure: no I/O.
 */

/** One line of a hunk: kept (' '), removed ('-') or added ('+'). */
export interface DiffLine {
  op: ' ' | '-' | '+';
  text: string;
}

export interface Hunk {
  /** 1-based first line in the old text (0 when the hunk has no old lines). */
  oldStart: number;
  oldLines: number;
  newStart: number;
  newLines: number;
  lines: DiffLine[];
}

export interface LineDiffOptions {
  /** Unchanged lines shown around each change. @default 3 */
  context?: number;
  /** Differing lines past which the search gives up and the middle is one replaced block. @default 1000 */
  maxEdits?: number;
}

/** A text's lines, without their ends; whether the last one ended with a newline is kept apart. */
export function splitLines(text: string): { lines: string[]; endsWithNewline: boolean } {
  if (text === '') return { lines: [], endsWithNewline: true };
  const endsWithNewline = text.endsWith('\n');
  const lines = (endsWithNewline ? text.slice(0, -1) : text).split('\n');
  return { lines, endsWithNewline };
}

/** The edit script from `a` to `b`: every line of both, in order, each kept, removed or added. */
export function diffLines(a: string[], b: string[], maxEdits = 1000): DiffLine[] {
  let start = 0;
  while (start < a.length && start < b.length && a[start] === b[start]) start++;
  let endA = a.length;
  let endB = b.length;
  while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) {
    endA--;
    endB--;
  }
  const out: DiffLine[] = [];
  for (let i = 0; i < start; i++) out.push({ op: ' ', text: a[i]! });
  for (const line of middle(a.slice(start, endA), b.slice(start, endB), maxEdits)) out.push(line);
  for (let i = endA; i < a.length; i++) out.push({ op: ' ', text: a[i]! });
  return out;
}

/** Myers on what the trimming left; the whole block replaced when it differs in more than maxEdits lines. */
function middle(a: string[], b: string[], maxEdits: number): DiffLine[] {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((text) => ({ op: '+', text }));
  if (m === 0) return a.map((text) => ({ op: '-', text }));
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  // v[k + offset]: the furthest x reached on diagonal k. trace[d] keeps diagonals -d..d of
  // v as it was before step d (d² numbers in all), to walk the path back.
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice(offset - d, offset + d + 1));
    for (let k = -d; k <= d; k += 2) {
      const down = k === -d || (k !== d && v[k - 1 + offset]! < v[k + 1 + offset]!);
      let x = down ? v[k + 1 + offset]! : v[k - 1 + offset]! + 1;
      let y = x - k;
      while (x < n && y < m && a[x] === b[y]) {
        x++;
        y++;
      }
      v[k + offset] = x;
      if (x >= n && y >= m) return backtrack(a, b, trace, d);
    }
  }
  return [...a.map((text) => ({ op: '-' as const, text })), ...b.map((text) => ({ op: '+' as const, text }))];
}

function backtrack(a: string[], b: string[], trace: Int32Array[], dEnd: number): DiffLine[] {
  const out: DiffLine[] = [];
  let x = a.length;
  let y = b.length;
  const keep = (toX: number, toY: number) => {
    while (x > toX && y > toY) {
      x--;
      y--;
      out.push({ op: ' ', text: a[x]! });
    }
  };
  for (let d = dEnd; d > 0; d--) {
    const v = trace[d]!;
    const at = (k: number) => v[k + d]!;
    const k = x - y;
    const down = k === -d || (k !== d && at(k - 1) < at(k + 1));
    const prevK = down ? k + 1 : k - 1;
    const prevX = at(prevK);
    keep(prevX, prevX - prevK);
    if (down) out.push({ op: '+', text: b[--y]! });
    else out.push({ op: '-', text: a[--x]! });
  }
  keep(0, 0);
  return out.reverse();
}

/** The edit script cut into hunks with `context` unchanged lines around each change. */
export function hunksOf(script: DiffLine[], context = 3): Hunk[] {
  const hunks: Hunk[] = [];
  const changed = script.map((l, i) => (l.op === ' ' ? -1 : i)).filter((i) => i >= 0);
  if (changed.length === 0) return hunks;
  // Old and new line numbers (1-based) before each script position.
  const oldAt: number[] = [];
  const newAt: number[] = [];
  let o = 1;
  let w = 1;
  for (const l of script) {
    oldAt.push(o);
    newAt.push(w);
    if (l.op !== '+') o++;
    if (l.op !== '-') w++;
  }
  let i = 0;
  while (i < changed.length) {
    const from = Math.max(0, changed[i]! - context);
    let to = Math.min(script.length, changed[i]! + context + 1);
    while (i + 1 < changed.length && changed[i + 1]! - context <= to) {
      i++;
      to = Math.min(script.length, changed[i]! + context + 1);
    }
    i++;
    const lines = script.slice(from, to);
    const oldLines = lines.filter((l) => l.op !== '+').length;
    const newLines = lines.filter((l) => l.op !== '-').length;
    hunks.push({
      oldStart: oldLines === 0 ? oldAt[from]! - 1 : oldAt[from]!,
      oldLines,
      newStart: newLines === 0 ? newAt[from]! - 1 : newAt[from]!,
      newLines,
      lines,
    });
  }
  return hunks;
}

/**
 * `diff -u` text of two versions of a file (no `---`/`+++` header lines; the caller names
 * the files); '' when they are equal. A last line without a newline is marked as diff does.
 */
export function unifiedDiff(before: string, after: string, options: LineDiffOptions = {}): string {
  if (before === after) return '';
  const a = splitLines(before);
  const b = splitLines(after);
  const script = diffLines(a.lines, b.lines, options.maxEdits);
  // A last line whose newline came or went differs even when its text is the same: diff(1)
  // shows it removed and added, each side marked.
  const tail = script.at(-1);
  if (a.endsWithNewline !== b.endsWithNewline && tail?.op === ' ') {
    script.pop();
    script.push({ op: '-', text: tail.text }, { op: '+', text: tail.text });
  }
  let out = '';
  for (const h of hunksOf(script, options.context ?? 3)) {
    out += `@@ -${range(h.oldStart, h.oldLines)} +${range(h.newStart, h.newLines)} @@\n`;
    let oldNo = h.oldStart - (h.oldLines === 0 ? 0 : 1);
    let newNo = h.newStart - (h.newLines === 0 ? 0 : 1);
    for (const l of h.lines) {
      out += `${l.op}${l.text}\n`;
      if (l.op !== '+') oldNo++;
      if (l.op !== '-') newNo++;
      const noNewline =
        (l.op === '-' && oldNo === a.lines.length && !a.endsWithNewline) ||
        (l.op === '+' && newNo === b.lines.length && !b.endsWithNewline) ||
        (l.op === ' ' && oldNo === a.lines.length && !a.endsWithNewline);
      if (noNewline) out += '\\ No newline at end of file\n';
    }
  }
  return out;
}

function range(start: number, lines: number): string {
  return lines === 1 ? `${start}` : `${start},${lines}`;
}
