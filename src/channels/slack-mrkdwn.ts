/**
 * An agent's Markdown as Slack's mrkdwn (the conversion and the cut are
 * markdown-parts.ts'): `*bold*`, `_italic_`, `~strike~`, `` `code` ``, ```` ``` ```` blocks
 * (Slack shows no language: it is dropped), `<url|text>` links, headings as bold.
 *
 * Slack's rules followed (api.slack.com/reference/surfaces/formatting): `&`, `<` and `>`
 * are markup, so they are escaped as `&amp;` `&lt;` `&gt;` everywhere, code and a link's
 * URL included; a URL holding `|` (or `<`, `>`) cannot be a link and stays text. mrkdwn
 * has no escape for `*`, `_`, `~` or `` ` ``: free text keeps them as written (Slack
 * formats only markers at word edges, so snake_case and a lone `*` read as written), and
 * a Markdown escape (`\*`) keeps its character, which Slack may then read as a marker.
 */

import type { ChannelPart } from './channel.js';
import { type Dialect, toMarkupParts } from './markdown-parts.js';

const LINK_URL = /^(https?:\/\/|mailto:)[^\s()<>|]+$/;

/** The text with `&`, `<` and `>` escaped: plain text as mrkdwn. */
export function escapeMrkdwn(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

const MRKDWN: Dialect = {
  escapeText: escapeMrkdwn,
  escapeCode: escapeMrkdwn,
  bold: { open: '*', close: '*' },
  italic: { open: '_', close: '_' },
  strike: { open: '~', close: '~' },
  code: { open: '`', close: '`' },
  pre: () => ({ open: '```\n', close: '\n```' }),
  link: (url) => (LINK_URL.test(url) ? { open: `<${escapeMrkdwn(url)}|`, close: '>', link: true } : null),
};

/** The agent's Markdown in mrkdwn parts of at most `limit` UTF-16 units each, each with its plain form. */
export function toSlackParts(markdown: string, limit: number): ChannelPart[] {
  return toMarkupParts(markdown, limit, MRKDWN).map((p) => ({ text: p.plain, formatted: p.markup }));
}
