/**
 * An agent's Markdown as Telegram MarkdownV2, cut into parts of at most `limit` characters.
 * Pure. What is converted: `**bold**` / `__bold__` and headings → bold, `*italic*` /
 * `_italic_` → italic, `~~strike~~` → strikethrough, `` `code` ``, fenced code blocks
 * (with their language), `[text](http…)` links. Everything else is text, with every
 * character MarkdownV2 reserves escaped: free text that is not valid Markdown (an
 * unclosed `*`, a stray `_` in snake_case, a `[` without its link) still goes out as
 * written. The output is always valid MarkdownV2 because it is generated, never passed
 * through: each character becomes one unit (escaped for where it stands) under a stack
 * of open entities, and a part is rendered from whole units, closing its open entities
 * at its end and reopening them at the next part's start. So a cut never falls inside an
 * escape or leaves an entity open, and every part also has a plain-text form (the same
 * characters, no markup) to send should Telegram refuse the markup anyway.
 *
 * Telegram's rules followed (core.telegram.org/bots/api#markdownv2-style): outside
 * entities `_*[]()~\`>#+-=|{}.!` and `\` are escaped; inside code and pre only `` ` `` and
 * `\`; inside a link's URL only `)` and `\`. Code and pre contain no other entity, so
 * code spans inside bold or italic stay text.
 */

/** An entity around units: its markers in MarkdownV2. Two with the same markers are one entity when adjacent. */
interface Wrapper {
  open: string;
  close: string;
}

interface Unit {
  /** The character as the user sees it. */
  raw: string;
  /** The same, escaped for where it stands. */
  text: string;
  ctx: readonly Wrapper[];
}

export interface TelegramPart {
  /** The part in MarkdownV2. */
  markdown: string;
  /** The same part without markup. */
  plain: string;
}

const SPECIAL = /[_*[\]()~`>#+\-=|{}.!\\]/;
const ASCII_PUNCTUATION = /[!-/:-@[-`{-~]/;
const LINK_URL = /^(https?:\/\/|mailto:|tg:\/\/)[^\s()]+$/;
const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*([\w+#.-]{0,32})[ \t]*$/;
const HEADING = /^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$/;

const BOLD: Wrapper = { open: '*', close: '*' };
const ITALIC: Wrapper = { open: '_', close: '_' };
const STRIKE: Wrapper = { open: '~', close: '~' };
const CODE: Wrapper = { open: '`', close: '`' };

/** The text escaped for plain MarkdownV2 (outside every entity). */
export function escapeMarkdownV2(text: string): string {
  return text.replace(/[_*[\]()~`>#+\-=|{}.!\\]/g, '\\$&');
}

/** The agent's Markdown in MarkdownV2 parts of at most `limit` UTF-16 units each. */
export function toTelegramParts(markdown: string, limit: number): TelegramPart[] {
  return packUnits(markdownUnits(markdown), limit).map((units) => ({
    markdown: renderUnits(units),
    plain: units.map((u) => u.raw).join(''),
  }));
}

/** Block level: fenced code blocks and headings by line; the rest inline. */
function markdownUnits(markdown: string): Unit[] {
  const units: Unit[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (i > 0) units.push(...textUnits('\n', []));
    const line = lines[i]!;
    const fence = FENCE.exec(line);
    if (fence) {
      const [, marker, lang] = fence;
      const body: string[] = [];
      // An unclosed fence runs to the end, as CommonMark reads it.
      while (i + 1 < lines.length && !closesFence(lines[i + 1]!, marker!)) body.push(lines[++i]!);
      if (i + 1 < lines.length) i++;
      const pre: Wrapper = { open: `\`\`\`${lang ?? ''}\n`, close: '\n```' };
      // Telegram refuses an empty entity: an empty block keeps one space.
      units.push(...codeUnits(body.length > 0 ? body.join('\n') : ' ', [pre]));
      continue;
    }
    const heading = HEADING.exec(line);
    if (heading && heading[1] !== '') units.push(...inlineUnits(heading[1]!, [BOLD]));
    else units.push(...inlineUnits(line, []));
  }
  return units;
}

function closesFence(line: string, marker: string): boolean {
  const trimmed = line.trim();
  return trimmed.length >= marker.length && trimmed === marker[0]!.repeat(trimmed.length);
}

/** One unit per character (a surrogate pair is one), escaped as outside any entity. */
function textUnits(text: string, ctx: readonly Wrapper[]): Unit[] {
  return Array.from(text, (raw) => ({ raw, text: SPECIAL.test(raw) ? `\\${raw}` : raw, ctx }));
}

function codeUnits(text: string, ctx: readonly Wrapper[]): Unit[] {
  return Array.from(text, (raw) => ({ raw, text: raw === '`' || raw === '\\' ? `\\${raw}` : raw, ctx }));
}

/** The inline spans of one line, inside the entities `ctx`. */
function inlineUnits(text: string, ctx: readonly Wrapper[]): Unit[] {
  const units: Unit[] = [];
  const nested = ctx.length > 0;
  const unclosed: Unclosed = new Map();
  let plainFrom = 0;
  let i = 0;
  const flush = (to: number) => {
    if (to > plainFrom) units.push(...textUnits(text.slice(plainFrom, to), ctx));
  };
  while (i < text.length) {
    const c = text[i]!;
    if (c === '\\' && ASCII_PUNCTUATION.test(text[i + 1] ?? '')) {
      // A Markdown escape: the character after it is text.
      flush(i);
      units.push(...textUnits(text[i + 1]!, ctx));
      i += 2;
      plainFrom = i;
      continue;
    }
    const span = nested && c === '`' ? null : spanAt(text, i, ctx, unclosed);
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

function spanAt(text: string, at: number, ctx: readonly Wrapper[], unclosed: Unclosed): Span | null {
  const c = text[at]!;
  if (c === '`') return codeSpanAt(text, at, ctx);
  if (c === '[' && !ctx.some((w) => w.open === '[')) return linkAt(text, at, ctx);
  if (c === '*' || c === '_') {
    const double = text[at + 1] === c;
    return emphasisAt(text, at, double ? c + c : c, double ? BOLD : ITALIC, ctx, unclosed);
  }
  if (c === '~' && text[at + 1] === '~') return emphasisAt(text, at, '~~', STRIKE, ctx, unclosed);
  return null;
}

function codeSpanAt(text: string, at: number, ctx: readonly Wrapper[]): Span | null {
  let n = 0;
  while (text[at + n] === '`') n++;
  const fence = '`'.repeat(n);
  for (let close = text.indexOf(fence, at + n); close !== -1; close = text.indexOf(fence, close + 1)) {
    // The closing run is exactly as long as the opening one.
    if (text[close + n] === '`' || text[close - 1] === '`') continue;
    if (close === at + n) return null;
    return { units: codeUnits(text.slice(at + n, close), [...ctx, CODE]), end: close + n };
  }
  return null;
}

function linkAt(text: string, at: number, ctx: readonly Wrapper[]): Span | null {
  const closeText = text.indexOf('](', at + 1);
  if (closeText <= at + 1) return null;
  const closeUrl = text.indexOf(')', closeText + 2);
  if (closeUrl === -1) return null;
  const label = text.slice(at + 1, closeText);
  const url = text.slice(closeText + 2, closeUrl);
  if (label.includes('[') || !LINK_URL.test(url)) return null;
  const link: Wrapper = { open: '[', close: `](${url.replace(/[)\\]/g, '\\$&')})` };
  return { units: inlineUnits(label, [...ctx, link]), end: closeUrl + 1 };
}

/** `delim`-wrapped text: opened before a non-space, closed after one; `_` only between words' edges. */
function emphasisAt(
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
    return { units: inlineUnits(text.slice(from, close), [...ctx, wrapper]), end: close + delim.length };
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
function packUnits(all: readonly Unit[], limit: number): Unit[][] {
  // A unit too big for a part with its entities (a link to a very long URL in a tiny
  // limit) goes out as text: a reply is never lost to its markup.
  const units = all.map((u) =>
    opening(u.ctx, 0).length + u.text.length + closing(u.ctx, 0).length <= limit
      ? u
      : textUnits(u.raw, [])[0]!,
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
    parts.push(units.slice(start, end));
    start = end;
  }
  return parts.length > 0 ? parts : [[]];
}
