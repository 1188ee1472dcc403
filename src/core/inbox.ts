/**
 * Files a user sent with a message, on their way into the session's workspace. A channel
 * stores each file's bytes as a blob (`channel-files/…`) before the message's commit and
 * names them in the message's data (`{inbox: [{name, key, size}]}`); the worker places
 * them at `inbox/<name>` in the workspace of the turn that handles the message, inside its
 * attempt layer, so they are committed or dropped with that turn (docs/channels.md,
 * *Attachments*). Names are made safe here once, where they enter: one path segment.
 * The other way, files a turn writes under `outbox/` are stored as blobs at its commit and
 * sent to the session's chat after its replies (the same shape, InboxFile).
 */

/** The workspace folder a message's files land in. */
export const INBOX_DIR = 'inbox';
/** The workspace folder whose files a turn writes are sent to the session's chat. */
export const OUTBOX_DIR = 'outbox';
/** The largest file sent back to a chat (Telegram's Bot API takes 50 MB uploads). */
export const OUTBOX_MAX_BYTES = 50 * 1000 * 1000;

/** One file of a message, as its data names it. */
export interface InboxFile {
  /** Its name in `inbox/`: one safe path segment. */
  name: string;
  /** The blob holding its bytes. */
  key: string;
  size: number;
}

const MAX_NAME = 120;

/**
 * A name a user gave a file as one safe path segment: no directories, no leading dot, no
 * control characters, at most 120 characters (the extension kept); `fallback` when
 * nothing is left.
 */
export function safeInboxName(name: string, fallback: string): string {
  const base = (name.split(/[/\\]/).pop() ?? '')
    .replace(/[\p{Cc}\p{Cf}]/gu, '')
    .replace(/^[.\s]+/, '')
    .trim();
  if (base === '') return fallback;
  if (base.length <= MAX_NAME) return base;
  const dot = base.lastIndexOf('.');
  const ext = dot > 0 && base.length - dot <= 16 ? base.slice(dot) : '';
  return base.slice(0, MAX_NAME - ext.length) + ext;
}

/** `name`, or `name-2`, `name-3`… (before the extension) until it is not in `taken`. */
export function uniqueInboxName(name: string, taken: ReadonlySet<string>): string {
  if (!taken.has(name)) return name;
  const dot = name.lastIndexOf('.');
  const [stem, ext] = dot > 0 ? [name.slice(0, dot), name.slice(dot)] : [name, ''];
  for (let n = 2; ; n++) if (!taken.has(`${stem}-${n}${ext}`)) return `${stem}-${n}${ext}`;
}

/** The files a message's data names (none for data written by anything else). */
export function inboxFilesOf(data: unknown): InboxFile[] {
  const inbox = (data as { inbox?: unknown } | null)?.inbox;
  if (!Array.isArray(inbox)) return [];
  return inbox.filter(
    (f): f is InboxFile =>
      typeof f?.name === 'string' &&
      f.name === safeInboxName(f.name, '') &&
      typeof f.key === 'string' &&
      typeof f.size === 'number',
  );
}

/** The line a message's text gets for each file, so that the agent knows where it is. */
export function inboxNote(file: Pick<InboxFile, 'name' | 'size'>): string {
  return `# attached: ${INBOX_DIR}/${file.name} (${file.size} bytes)`;
}

/** Why a file was left out, naming the limit: a note line for the agent, and the user's notice. */
export function inboxRefusal(name: string, sizeBytes: number | null, limitBytes: number): string {
  const size = sizeBytes === null ? '' : ` (${mib(sizeBytes)} MiB)`;
  return `not attached: ${name}${size} is over the ${mib(limitBytes)} MiB limit for files`;
}

function mib(bytes: number): string {
  return (bytes / 2 ** 20).toFixed(1);
}
