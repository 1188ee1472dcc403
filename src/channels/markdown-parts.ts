/**
 * An agent's Markdown in a chat platform's markup, cut into parts of at most `limit`
 * characters. Pure; the markup itself is a Dialect (telegram-markdown.ts: MarkdownV2,
 * slack-mrkdwn.ts: Slack's mrkdwn). What is converted: `**bold**` / `__bold__` and
 * headings → bold, `*italic*` / `_italic_` → italic, `~~strike~~` → strikethrough,
 * `` `code` ``, fenced code blocks (with their language), `[text](url)` links to a URL the
 * dialect takes. Everything else is text, escaped as the dialect escapes it: free text
 * that is not valid Markdown (an unclosed `*`, a stray `_` in snake_case, a `[` without
 * its link) still goes out as written. The output is always valid markup because it is
 * generated, never passed through: each character becomes one unit (escaped for where it
 * stands) under a stack of open entities, and a part is rendered from whole units,
 * closing its open entities at its end and reopening them at the next part's start. So a
 * cut never falls inside an escape or leaves an entity open, and every part also has a
 * plain-text form (the same characters, no markup). Code contains no other entity, so
 * code spans inside bold or italic stay text.
 */

/** An entity around units: its markers in the platform's markup. Two with the same markers are one entity when adjacent. */
export interface Wrapper {
  open: string;
  close: string;
  /** A link: links do not nest. */
  link?: true;
}

/** A platform's markup: its entities' markers and how a character is escaped where it stands. */
export interface Dialect {
  /** A character outside code. */
  escapeText(raw: string): string;
  /** A character inside a code span or block. */
  escapeCode(raw: string): string;
  bold: Wrapper;
  italic: Wrapper;
  strike: Wrapper;
  code: Wrapper;
  pre(lang: string): Wrapper;
  /** The link to `url`, or null when the platform takes no link there (it stays text). */
  link(url: string): Wrapper | null;
}

interface Unit {
  /** The character as the user sees it. */
  raw: string;
  /** The same, escaped for where it stands. */
  text: string;
  ctx: readonly Wrapper[];
}

export interface MarkupPart {
  /** The part in the platform's markup. */
  markup: string;
  /** The same part without markup. */
  plain: string;
}

const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/;
const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]{0,32})[ \t]*$/;
const HEADING = /^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$/;

/** The agent's Markdown in parts of at most `limit` UTF-16 units each, in `dialect`'s markup. */
export function toMarkupParts(markdown: string, limit: number, dialect: Dialect): MarkupPart[] {
  return packUnits(dialect, markdownUnits(dialect, markdown), limit).map((units) => ({
    markup: renderUnits(units),
    plain: units.map((u) => u.raw).join(''),
  }));
}

/** Block level: fenced code blocks and headings by line; the rest inline. */
function markdownUnits(d: Dialect, markdown: string): Unit[] {
  const units: Unit[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (i > 0) units.push(...textUnits(d, '\n', []));
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const [, marker, lang] = fence;
      const body: string[] = [];
      // An unclosed fence runs to the end, as CommonMark reads it.
      while (i + 1 < lines.length && !closesFence(lines[i + 1]!, marker!)) body.push(lines[++i]!);
      if (i + 1 < lines.length) i++;
      const pre = d.pre(lang ?? '');
      // Telegram refuses an empty entity, Slack shows an empty block as its fences: it keeps one space.
      units.push(...codeUnits(d, body.length > 0 ? body.join('\n') : ' ', [pre]));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading && heading[1] !== '') units.push(...inlineUnits(d, heading[1]!, [d.bold]));
    else units.push(...inlineUnits(d, line, []));
  }
  return units;
}

function closesFence(line: string, marker: string): boolean {
  const trimmed = line.trim();
  return trimmed.length >= marker.length && trimmed === marker[0]!.repeat(trimmed.length);
}

/** One unit per character (a surrogate pair is one), escaped as outside any entity. */
function textUnits(d: Dialect, text: string, ctx: readonly Wrapper[]): Unit[] {
  return Array.from(text, (raw) => ({ raw, text: d.escapeText(raw), ctx }));
}

function codeUnits(d: Dialect, text: string, ctx: readonly Wrapper[]): Unit[] {
  return Array.from(text, (raw) => ({ raw, text: d.escapeCode(raw), ctx }));
}

/** The inline spans of one line, inside the entities `ctx`. */
function inlineUnits(d: Dialect, text: string, ctx: readonly Wrapper[]): Unit[] {
  const units: Unit[] = [];
  const nested = ctx.length > 0;
  const unclosed: Unclosed = new Map();
  let plainFrom = 0;
  let i = 0;
  const flush = (to: number) => {
    if (to > plainFrom) units.push(...textUnits(d, text.slice(plainFrom, to), ctx));
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\' && ASCII_PUNCTUATION.test(text[i + 1] ?? '')) {
      // A Markdown escape: the character after it is text.
      flush(i);
      units.push(...textUnits(d, text[i + 1]!, ctx));
      i += 2;
      plainFrom = i;
      continue;
    }
    const span = nested && c === '`' ? null : spanAt(d, text, i, ctx, unclosed);
    if (span) {
      flush(i);
      units.push(...span.units);
      i = span.end;
      plainFrom = i;
      continue;
    }
    i += 1;
  }
  flush(text.length);
  return units;
}

interface Span {
  units: Unit[];
  end: number;
}

/**
 * Per delimiter, the earliest position from which a search for its closing found none: a
 * closing's validity depends on its own neighbours only, so every later search would fail
 * too. Keeps a line of many unmatched markers linear instead of quadratic.
 */
type Unclosed = Map<string, number>;

function spanAt(
  d: Dialect,
  text: string,
  at: number,
  ctx: readonly Wrapper[],
  unclosed: Unclosed,
): Span | null {
  const c = text[at]!;
  if (c === '`') return codeSpanAt(d, text, at, ctx);
  if (c === '[' && !ctx.some((w) => w.link)) return linkAt(d, text, at, ctx);
  if (c === '*' || c === '_') {
    const double = text[at + 1] === c;
    return emphasisAt(d, text, at, double ? c + c : c, double ? d.bold : d.italic, ctx, unclosed);
  }
  if (c === '~' && text[at + 1] === '~') return emphasisAt(d, text, at, '~~', d.strike, ctx, unclosed);
  return null;
}

function codeSpanAt(d: Dialect, text: string, at: number, ctx: readonly Wrapper[]): Span | null {
  let n = 0;
  while (text[at + n] === '`') n++;
  const fence = '`'.repeat(n);
  for (let close = text.indexOf(fence, at + n); close !== -1; close = text.indexOf(fence, close + 1)) {
    // The closing run is exactly as long as the opening one.
    if (text[close + n] === '`' || text[close - 1] === '`') continue;
    if (close === at + n) return null;
    return { units: codeUnits(d, text.slice(at + n, close), [...ctx, d.code]), end: close + n };
  }
  return null;
}

function linkAt(d: Dialect, text: string, at: number, ctx: readonly Wrapper[]): Span | null {
  const closeText = text.indexOf('](', at + 1);
  if (closeText <= at + 1) return null;
  const closeUrl = text.indexOf(')', closeText + 2);
  if (closeUrl === -1) return null;
  const label = text.slice(at + 1, closeText);
  const url = text.slice(closeText + 2, closeUrl);
  const link = label.includes('[') ? null : d.link(url);
  if (!link) return null;
  return { units: inlineUnits(d, label, [...ctx, link]), end: closeUrl + 1 };
}

/** `delim`-wrapped text: opened before a non-space, closed after one; `_` only between words' edges. */
function emphasisAt(
  d: Dialect,
  text: string,
  at: number,
  delim: string,
  wrapper: Wrapper,
  ctx: readonly Wrapper[],
  unclosed: Unclosed,
): Span | null {
  if (ctx.includes(wrapper)) return null;
  const from = at + delim.length;
  const word = delim[0] === '_';
  if (/\s/.test(text[from] ?? ' ') || text[from] === delim[0]) return null;
  if (word && /\w/.test(text[at - 1] ?? '')) return null;
  if (from + 1 >= (unclosed.get(delim) ?? Number.POSITIVE_INFINITY)) return null;
  for (let close = text.indexOf(delim, from + 1); close !== -1; close = text.indexOf(delim, close + 1)) {
    if (/\s/.test(text[close - 1]!)) continue;
    if (text[close + delim.length] === delim[0]) continue;
    if (word && /\w/.test(text[close + delim.length] ?? '')) continue;
    return { units: inlineUnits(d, text.slice(from, close), [...ctx, wrapper]), end: close + delim.length };
  }
  unclosed.set(delim, from + 1);
  return null;
}

const same = (a: Wrapper, b: Wrapper) => a.open === b.open && a.close === b.close;

function commonDepth(a: readonly Wrapper[], b: readonly Wrapper[]): number {
  let n = 0;
  while (n < a.length && n < b.length && same(a[n]!, b[n]!)) n++;
  return n;
}

function closing(ctx: readonly Wrapper[], keep: number): string {
  let s = '';
  for (let i = ctx.length - 1; i >= keep; i--) s += ctx[i]!.close;
  return s;
}

function opening(ctx: readonly Wrapper[], keep: number): string {
  let s = '';
  for (let i = keep; i < ctx.length; i++) s += ctx[i]!.open;
  return s;
}

/** The markup between two units: close what `from` has and `to` has not, open the rest of `to`. */
function transition(from: readonly Wrapper[], to: readonly Wrapper[]): string {
  const keep = commonDepth(from, to);
  return closing(from, keep) + opening(to, keep);
}

function renderUnits(units: readonly Unit[]): string {
  let out = '';
  let ctx: readonly Wrapper[] = [];
  for (const u of units) {
    out += transition(ctx, u.ctx) + u.text;
    ctx = u.ctx;
  }
  return out + closing(ctx, 0);
}

/**
 * Whole units into parts whose rendering fits `limit`, cut after the last newline or
 * space in a part's second half when there is one (as splitChannelText cuts plain text).
 */
function packUnits(d: Dialect, all: readonly Unit[], limit: number): Unit[][] {
  // A unit too big for a part with its entities (a link to a very long URL in a tiny
  // limit) goes out as text: a reply is never lost to its markup.
  const units = all.map((u) =>
    opening(u.ctx, 0).length + u.text.length + closing(u.ctx, 0).length <= limit
      ? u
      : textUnits(d, u.raw, [])[0]!,
  );
  const parts: Unit[][] = [];
  let start = 0;
  while (start < units.length) {
    let length = 0;
    let ctx: readonly Wrapper[] = [];
    let soft = -1;
    let i = start;
    for (; i < units.length; i++) {
      const u = units[i]!;
      const step = transition(ctx, u.ctx).length + u.text.length;
      if (i > start && length + step + closing(u.ctx, 0).length > limit) break;
      length += step;
      ctx = u.ctx;
      if ((u.raw === '\n' || u.raw === ' ') && length >= limit / 2) soft = i + 1;
    }
    const end = i < units.length && soft > start ? soft : i;
    // A space at the cut goes outside its entities: Slack takes no closing marker after a space.
    if (end === soft && units[end - 1]!.raw === ' ') units[end - 1] = textUnits(d, ' ', [])[0]!;
    parts.push(units.slice(start, end));
    start = end;
  }
  return parts.length > 0 ? parts : [[]];
}
