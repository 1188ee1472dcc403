/**
 * Mail as an email channel reads and writes it, without I/O: the fields of an inbound mail
 * turned into a ChannelInbound (who sent it, which conversation, what text, which files), and the
 * headers of a reply (its deterministic Message-ID, Subject, In-Reply-To, References).
 *
 * Invariants: a send's Message-ID depends only on the channel, the outbox key and the
 * bot's address, so every attempt of one send carries the same id and a copy that landed
 * can be found by it; berth's own mail and automatic mail (RFC 3834 Auto-Submitted, bulk
 * Precedence) never reach the agent, so two bots or a vacation responder cannot loop.
 */
import { createHash } from 'node:crypto';
import type { ChannelAttachment, ChannelInbound } from '../core/index.js';

/** What the IMAP side read of one mail. */
export interface MailFields {
  /** The Message-ID with its angle brackets, or null when the mail has none. */
  messageId: string | null;
  /** The From address (the first one). */
  from: string;
  /** The Subject, decoded; null when the mail has none. */
  subject: string | null;
  /** The header lines asked for, by lower-case name (unfolded). */
  headers: Map<string, string>;
  /** The text/plain part, decoded; null when there is none. */
  plain: string | null;
  /** The text/html part, decoded; null when there is none. */
  html: string | null;
  /** The parts sent as files, not fetched yet. */
  attachments: ChannelAttachment[];
}

/** The header lines an inbound mail is read with. */
export const MAIL_HEADERS = ['references', 'in-reply-to', 'auto-submitted', 'precedence'] as const;

/** `<id>` tokens of a Message-ID, In-Reply-To or References header, in order. */
export function parseMessageIds(header: string | undefined): string[] {
  return header?.match(/<[^<>\s]+>/g) ?? [];
}

/** A raw header block (as IMAP's BODY[HEADER.FIELDS] returns it) as lower-case name → unfolded value. */
export function parseHeaderBlock(raw: string): Map<string, string> {
  const headers = new Map<string, string>();
  for (const line of raw.replace(/\r?\n[ \t]+/g, ' ').split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
  }
  return headers;
}

/** Mail a machine sent (RFC 3834 Auto-Submitted other than "no", Precedence bulk/junk/list): never answered. */
export function isAutomaticMail(headers: Map<string, string>): boolean {
  const auto = headers.get('auto-submitted')?.toLowerCase();
  if (auto !== undefined && auto !== '' && !auto.startsWith('no')) return true;
  return /^(bulk|junk|list)\b/i.test(headers.get('precedence') ?? '');
}

/** An HTML body as plain text: tags dropped, blocks on their own lines, the common entities decoded. */
export function htmlToText(html: string): string {
  const entities: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'", nbsp: ' ' };
  return html
    .replace(/<(style|script|head)\b[\s\S]*?<\/\1>/gi, '')
    .replace(/<br\s*\/?>|<\/(p|div|li|tr|h[1-6])>/gi, '\n')
    .replace(/<[^>]*>/g, '')
    .replace(/&(amp|lt|gt|quot|#39|nbsp);/g, (_, e: string) => entities[e] ?? '');
}

/**
 * The new text of a mail: the quoted history a mail client appends to a reply (trailing
 * `>` lines, the "On … wrote:" line above them, blank lines) is cut, since the session
 * already holds that conversation.
 */
export function stripQuotedReply(text: string): string {
  const lines = text.replace(/\r\n/g, '\n').split('\n');
  let end = lines.length;
  const blankOrQuoted = (l: string) => l.trim() === '' || l.startsWith('>');
  while (end > 0 && blankOrQuoted(lines[end - 1]!)) end--;
  if (end < lines.length && end > 0 && /wrote:\s*$/.test(lines[end - 1]!)) {
    end--;
    while (end > 0 && lines[end - 1]!.trim() === '') end--;
  }
  return lines.slice(0, end).join('\n').trim();
}

/** The text a mail carries for the agent: its plain part, else its HTML part as text, else ''. */
export function mailText(fields: Pick<MailFields, 'plain' | 'html'>): string {
  if (fields.plain !== null && fields.plain.trim() !== '') return stripQuotedReply(fields.plain);
  if (fields.html !== null) return stripQuotedReply(htmlToText(fields.html));
  return '';
}

/**
 * The line a thread's first mail gets for its Subject, which says what the mail is about
 * (a shell comment, like the attachment notes, so a `command` agent runs the body alone).
 * Later mails of a thread repeat it with `Re:` and get none.
 */
export function subjectNote(subject: string | null, headers: Map<string, string>): string {
  const answers = headers.has('in-reply-to') || headers.has('references');
  const line = subject?.replace(/[\p{Cc}\p{Cf}]/gu, ' ').trim() ?? '';
  return answers || line === '' ? '' : `# subject: ${line}`;
}

/**
 * The conversation a mail belongs to: the root of its References (the first), else what it
 * answers, else itself — the same for every mail of a thread, whoever writes next. Hashed,
 * so a session id stays short whatever a client puts in its ids.
 */
export function mailThreadId(messageId: string, headers: Map<string, string>): string {
  const root =
    parseMessageIds(headers.get('references'))[0] ??
    parseMessageIds(headers.get('in-reply-to'))[0] ??
    messageId;
  return createHash('sha256').update(root).digest('hex').slice(0, 16);
}

/**
 * An inbound mail as every platform's message: the sender's address is the chat and the
 * user (`@domain` allowlist entries match its domain, as `@username` does elsewhere). Null
 * when it must reach nobody: berth's own copies and automatic mail.
 */
export function toEmailInbound(
  fields: MailFields,
  ownAddress: string,
  fallbackId: string,
): ChannelInbound | null {
  const from = fields.from.toLowerCase();
  if (from === ownAddress.toLowerCase() || isAutomaticMail(fields.headers)) return null;
  const messageId = fields.messageId ?? fallbackId;
  return {
    updateId: 0,
    chatId: from,
    chatType: 'email',
    userId: from,
    username: from.slice(from.lastIndexOf('@') + 1),
    messageId,
    threadId: mailThreadId(messageId, fields.headers),
    text: [subjectNote(fields.subject, fields.headers), mailText(fields)].filter((l) => l !== '').join('\n'),
    ...(fields.attachments.length > 0 ? { attachments: fields.attachments } : {}),
  };
}

/** The Message-ID of one send (outbox row and part): the same on every attempt. */
export function sendMessageId(channelId: string, key: string, ownAddress: string): string {
  return `<berth.${channelId}.${key}@${ownAddress.slice(ownAddress.lastIndexOf('@') + 1)}>`;
}

/** The Subject of a reply: the original's, marked once as a reply. */
export function replySubject(original: string | null): string {
  const subject = original?.trim() ?? '';
  if (subject === '') return 'Re: your message';
  return /^re:/i.test(subject) ? subject : `Re: ${subject}`;
}

/** The References of a reply: the original's, then the original itself (RFC 5322 §3.6.4). */
export function replyReferences(originalReferences: string | undefined, replyTo: string): string[] {
  const chain = parseMessageIds(originalReferences).filter((id) => id !== replyTo);
  return [...chain, replyTo];
}
