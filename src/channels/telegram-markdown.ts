/**
 * An agent's Markdown as Telegram MarkdownV2 (the conversion and the cut are
 * markdown-parts.ts'). Every part also has its plain form, to send should Telegram refuse
 * the markup anyway.
 *
 * Telegram's rules followed (core.telegram.org/bots/api#markdownv2-style): outside
 * entities `_*[]()~\`>#+-=|{}.!` and `\` are escaped; inside code and pre only `` ` `` and
 * `\`; inside a link's URL only `)` and `\`.
 */
import { type Dialect, toMarkupParts } from './markdown-parts.js';

export interface TelegramPart {
  /** The part in MarkdownV2. */
  markdown: string;
  /** The same part without markup. */
  plain: string;
}

const SPECIAL = /[_*[\]()~`>#+\-=|{}.!\\]/;
const LINK_URL = /^(https?:\/\/|mailto:|tg:\/\/)[^\s()]+$/;

const MARKDOWN_V2: Dialect = {
  escapeText: (raw) => (SPECIAL.test(raw) ? `\\${raw}` : raw),
  escapeCode: (raw) => (raw === '`' || raw === '\\' ? `\\${raw}` : raw),
  bold: { open: '*', close: '*' },
  italic: { open: '_', close: '_' },
  strike: { open: '~', close: '~' },
  code: { open: '`', close: '`' },
  pre: (lang) => ({ open: `\`\`\`${lang}\n`, close: '\n```' }),
  link: (url) =>
    LINK_URL.test(url) ? { open: '[', close: `](${url.replace(/[)\\]/g, '\\$&')})`, link: true } : null,
};

/** The text escaped for plain MarkdownV2 (outside every entity). */
export function escapeMarkdownV2(text: string): string {
  return text.replace(/[_*[\]()~`>#+\-=|{}.!\\]/g, '\\$&');
}

/** The agent's Markdown in MarkdownV2 parts of at most `limit` UTF-16 units each. */
export function toTelegramParts(markdown: string, limit: number): TelegramPart[] {
  return toMarkupParts(markdown, limit, MARKDOWN_V2).map((p) => ({ markdown: p.markup, plain: p.plain }));
}
