/**
 * MarkdownV2 read the way Telegram reads it (core.telegram.org/bots/api#markdownv2-style),
 * for the fake Bot API and the converter's tests: a reserved character unescaped, an
 * entity left open, closed out of order or empty, code inside another entity, a bad escape
 * in code or a URL: each throws, where Telegram answers 400 "can't parse entities".
 */
export const RESERVED = '_*[]()~`>#+-=|{}.!';

/** The text a user sees. */
export function readMarkdownV2(s: string): string {
  let out = '';
  const open: string[] = [];
  let i = 0;
  const toggle = (marker: string) => {
    if (open.at(-1) === marker) open.pop();
    else if (open.includes(marker)) throw new Error(`entity ${marker} closed out of order at ${i}`);
    else open.push(marker);
  };
  let entityStart: number[] = [];
  while (i < s.length) {
    const c = s[i]!;
    if (c === '\\') {
      if (i + 1 >= s.length) throw new Error('escape at the end');
      out += s[i + 1];
      i += 2;
      continue;
    }
    if (c === '`') {
      const pre = s.startsWith('```', i);
      let j = i + (pre ? 3 : 1);
      if (pre) {
        const nl = s.indexOf('\n', j);
        if (nl === -1) throw new Error('pre without a newline');
        j = nl + 1;
      }
      let body = '';
      for (;;) {
        if (j >= s.length) throw new Error('unclosed code');
        if (s[j] === '\\') {
          if (s[j + 1] !== '`' && s[j + 1] !== '\\') throw new Error('bad escape in code');
          body += s[j + 1];
          j += 2;
          continue;
        }
        if (s[j] === '`') {
          if (pre && !s.startsWith('```', j)) throw new Error('` in pre');
          break;
        }
        body += s[j];
        j += 1;
      }
      if (pre && body.endsWith('\n')) body = body.slice(0, -1);
      if (body === '') throw new Error('empty code');
      if (open.length > 0) throw new Error('code inside another entity');
      out += body;
      i = j + (pre ? 3 : 1);
      continue;
    }
    if (c === '*' || c === '_' || c === '~') {
      if (c === '_' && s[i + 1] === '_') throw new Error('underline (__) generated');
      if (open.at(-1) === c && entityStart.at(-1) === out.length) throw new Error('empty entity');
      if (open.at(-1) !== c) entityStart.push(out.length);
      else entityStart = entityStart.slice(0, -1);
      toggle(c);
      i += 1;
      continue;
    }
    if (c === '[') {
      toggle('[');
      entityStart.push(out.length);
      i += 1;
      continue;
    }
    if (c === ']') {
      if (open.at(-1) !== '[') throw new Error('] outside a link');
      if (s[i + 1] !== '(') throw new Error('link without a URL');
      let j = i + 2;
      let url = '';
      while (j < s.length && s[j] !== ')') {
        if (s[j] === '\\') {
          if (s[j + 1] !== ')' && s[j + 1] !== '\\') throw new Error('bad escape in URL');
          url += s[j + 1];
          j += 2;
        } else url += s[j++];
      }
      if (j >= s.length || url === '') throw new Error('unclosed URL');
      open.pop();
      entityStart = entityStart.slice(0, -1);
      i = j + 1;
      continue;
    }
    if (RESERVED.includes(c)) throw new Error(`character ${c} is reserved and must be escaped`);
    out += c;
    i += 1;
  }
  if (open.length > 0) throw new Error(`unclosed ${open.join('')}`);
  return out;
}
