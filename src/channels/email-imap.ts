/**
 * The IMAP side of an email channel (imapflow): the lease holder's connection that reads
 * the mailbox and waits in IDLE for new mail, and the short reads the SMTP side asks for
 * (the mail a reply answers, a send's own copy found by its Message-ID).
 *
 * Invariants: a mail is acknowledged (flagged \Seen) only after its commit resolved, so a
 * crash before the commit leaves it unseen and read again, and a crash between the commit
 * and the flag reads it again to find its Message-ID committed (`duplicate`, nothing
 * written) and flag it then. Every unseen mail is read on every pass (level-triggered: an
 * EXISTS only wakes the pass early), oldest first. The password never leaves this process.
 */
import { ImapFlow, type MessageStructureObject } from 'imapflow';
import { type ChannelAttachment, type EmailSettings, failpoint, WakeSignal } from '../core/index.js';
import { type ChannelEvent, PlatformError } from './channel.js';
import { MAIL_HEADERS, type MailFields, parseHeaderBlock, toEmailInbound } from './email-message.js';

/** How often the mailbox is read again when no EXISTS came (a missed one, a server without IDLE). */
const RESCAN_MS = 60_000;
/** The most of one text part read: the rest of a longer mail is cut. */
const MAX_TEXT_BYTES = 1_000_000;

/** A mail server's failure as the runner acts on it: a refused login is for good, the rest transient. */
export function mailFailure(err: unknown, server: string): PlatformError {
  if (err instanceof PlatformError) return err;
  const e = err as { authenticationFailed?: boolean; responseCode?: number; code?: string; message?: string };
  const description = `${server}: ${e.message ?? String(err)}`;
  if (e.authenticationFailed || e.code === 'EAUTH')
    return new PlatformError({ kind: 'refused', status: 401, description }, { cause: err });
  // SMTP 5xx: the server refused this mail for good (no such recipient, policy); 4xx is worth a retry.
  if (typeof e.responseCode === 'number' && e.responseCode >= 500)
    return new PlatformError({ kind: 'refused', status: e.responseCode, description }, { cause: err });
  return new PlatformError({ kind: 'transient', description }, { cause: err });
}

function imapClient(settings: EmailSettings, password: string): ImapFlow {
  const client = new ImapFlow({
    host: settings.imapHost,
    port: settings.imapPort,
    secure: settings.imapSecurity === 'tls',
    doSTARTTLS:
      settings.imapSecurity === 'starttls' ? true : settings.imapSecurity === 'none' ? false : undefined,
    auth: { user: settings.user, pass: password },
    logger: false,
    disableAutoIdle: true,
  });
  // A socket error is also the connect() or command that failed: handled there.
  client.on('error', () => {});
  return client;
}

/** Runs `use` on a fresh connection to the mailbox, logged out after. */
async function withMailbox<T>(
  settings: EmailSettings,
  password: string,
  signal: AbortSignal,
  use: (client: ImapFlow) => Promise<T>,
): Promise<T> {
  const client = imapClient(settings, password);
  const onAbort = () => client.close();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await client.connect();
    return await use(client);
  } catch (err) {
    throw mailFailure(err, 'IMAP');
  } finally {
    signal.removeEventListener('abort', onAbort);
    await client.logout().catch(() => client.close());
  }
}

/** The first part of `type` that is not an attachment, depth first. */
function findPart(node: MessageStructureObject, type: string): string | null {
  if (node.childNodes) {
    for (const child of node.childNodes) {
      const found = findPart(child, type);
      if (found !== null) return found;
    }
    return null;
  }
  if (node.type.toLowerCase() !== type || node.disposition?.toLowerCase() === 'attachment') return null;
  return node.part ?? '1';
}

/**
 * The parts a mail carries as files, depth first: those marked `attachment`, and any other
 * leaf with a file name that is not the text being read. An attachment's id names its
 * mailbox's UIDVALIDITY, its uid and its part, which is all a later connection needs.
 */
function findAttachments(
  node: MessageStructureObject,
  uid: number,
  uidValidity: bigint,
): ChannelAttachment[] {
  if (node.childNodes) return node.childNodes.flatMap((child) => findAttachments(child, uid, uidValidity));
  const name = node.dispositionParameters?.filename ?? node.parameters?.name;
  const attached = node.disposition?.toLowerCase() === 'attachment';
  const text = /^text\/(plain|html)$/i.test(node.type);
  if (!attached && (name === undefined || text)) return [];
  return [
    {
      id: `${uidValidity}.${uid}.${node.part ?? '1'}`,
      name: name ?? `part-${node.part ?? '1'}`,
      // The structure gives the encoded size (base64 is a third larger): the download measures.
      sizeBytes: null,
    },
  ];
}

async function readPart(client: ImapFlow, uid: number, part: string | null): Promise<string | null> {
  if (part === null) return null;
  const download = await client.download(String(uid), part, { uid: true, maxBytes: MAX_TEXT_BYTES });
  if (!('content' in download) || !download.content) return null;
  const chunks: Buffer[] = [];
  for await (const chunk of download.content) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/** One mail as a channel event keyed by its Message-ID; null when it vanished meanwhile (expunged). */
async function readMail(
  client: ImapFlow,
  uid: number,
  settings: EmailSettings,
): Promise<ChannelEvent | null> {
  const msg = await client.fetchOne(
    String(uid),
    { uid: true, envelope: true, bodyStructure: true, headers: [...MAIL_HEADERS] },
    { uid: true },
  );
  if (!msg) return null;
  const structure = msg.bodyStructure;
  const uidValidity = client.mailbox ? client.mailbox.uidValidity : 0n;
  const fields: MailFields = {
    messageId: msg.envelope?.messageId ?? null,
    from: msg.envelope?.from?.[0]?.address ?? '',
    subject: msg.envelope?.subject ?? null,
    headers: parseHeaderBlock(msg.headers?.toString('utf8') ?? ''),
    plain: structure ? await readPart(client, uid, findPart(structure, 'text/plain')) : null,
    html: structure ? await readPart(client, uid, findPart(structure, 'text/html')) : null,
    attachments: structure ? findAttachments(structure, uid, uidValidity) : [],
  };
  // A mail without a Message-ID is keyed by its place in the mailbox instead.
  const fallbackId = `<uid.${uidValidity}.${uid}@${settings.mailbox}>`;
  const inbound = toEmailInbound(fields, settings.address, fallbackId);
  return { eventId: fields.messageId ?? fallbackId, inbound };
}

/**
 * Holds the mailbox open until `signal`: every unseen mail, oldest first, is handed to
 * `commit` and flagged \Seen once that resolved; then IDLE until new mail (or RESCAN_MS).
 * Rejects with a PlatformError when the connection fails or closes.
 */
export async function listenMailbox(
  settings: EmailSettings,
  password: string,
  commit: (event: ChannelEvent) => Promise<void>,
  signal: AbortSignal,
): Promise<void> {
  await withMailbox(settings, password, signal, async (client) => {
    const wake = new WakeSignal();
    let closed = false;
    client.on('exists', () => wake.notify());
    client.on('close', () => {
      closed = true;
      wake.notify();
    });
    const onAbort = () => wake.notify();
    signal.addEventListener('abort', onAbort, { once: true });
    const lock = await client.getMailboxLock(settings.mailbox);
    try {
      while (!signal.aborted) {
        if (closed) throw new PlatformError({ kind: 'transient', description: 'IMAP: connection closed' });
        const unseen = (await client.search({ seen: false }, { uid: true })) || [];
        for (const uid of unseen.sort((a, b) => a - b)) {
          if (signal.aborted) return;
          const event = await readMail(client, uid, settings);
          if (event === null) continue;
          await commit(event);
          failpoint('channel-after-commit');
          await client.messageFlagsAdd(String(uid), ['\\Seen'], { uid: true });
        }
        // IDLE inside the lock (auto-IDLE never starts while one is held); the next command ends it.
        void client.idle().catch(() => {});
        await wake.wait(RESCAN_MS);
      }
    } finally {
      signal.removeEventListener('abort', onAbort);
      lock.release();
    }
  });
}

/**
 * The bytes of an attachment (findAttachments' id), read whole on a connection of its own
 * while the listening one waits for its commit. Refused when the mailbox was renumbered
 * (another UIDVALIDITY) or the mail is gone, or when the part is over `maxBytes`.
 */
export async function downloadAttachment(
  settings: EmailSettings,
  password: string,
  attachment: ChannelAttachment,
  maxBytes: number,
  signal: AbortSignal,
): Promise<Buffer> {
  const [uidValidity, uid, part] = attachment.id.split('.', 3) as [string, string, string];
  const refused = (why: string) =>
    new PlatformError({ kind: 'refused', status: 404, description: `IMAP: ${attachment.name} ${why}` });
  return withMailbox(settings, password, signal, async (client) => {
    const lock = await client.getMailboxLock(settings.mailbox);
    try {
      if (client.mailbox && String(client.mailbox.uidValidity) !== uidValidity)
        throw refused('is in a mailbox renumbered since (UIDVALIDITY changed)');
      const download = await client.download(uid, part, { uid: true, maxBytes: maxBytes + 1 });
      if (!('content' in download) || !download.content) throw refused('is gone from the mailbox');
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of download.content) {
        size += (chunk as Buffer).length;
        if (size > maxBytes) throw refused(`is over ${maxBytes} bytes`);
        chunks.push(chunk as Buffer);
      }
      return Buffer.concat(chunks);
    } finally {
      lock.release();
    }
  });
}

/** The Subject and References of the mail `messageId` in the mailbox, or null when it is not there (deleted). */
export async function readOriginal(
  settings: EmailSettings,
  password: string,
  messageId: string,
  signal: AbortSignal,
): Promise<{ subject: string | null; references: string | undefined } | null> {
  return withMailbox(settings, password, signal, async (client) => {
    const lock = await client.getMailboxLock(settings.mailbox);
    try {
      const [uid] = (await client.search({ header: { 'message-id': messageId } }, { uid: true })) || [];
      if (uid === undefined) return null;
      const msg = await client.fetchOne(
        String(uid),
        { envelope: true, headers: ['references'] },
        { uid: true },
      );
      if (!msg) return null;
      return {
        subject: msg.envelope?.subject ?? null,
        references: parseHeaderBlock(msg.headers?.toString('utf8') ?? '').get('references'),
      };
    } finally {
      lock.release();
    }
  });
}

/**
 * Whether a mail from the bot with `messageId` is in the mailbox (where the bot's own copy
 * of each send arrives) or in the account's Sent mailbox (where a provider files what its
 * SMTP sent).
 */
export async function mailboxHolds(
  settings: EmailSettings,
  password: string,
  messageId: string,
  signal: AbortSignal,
): Promise<boolean> {
  return withMailbox(settings, password, signal, async (client) => {
    const sent = (await client.list()).find((m) => m.specialUse === '\\Sent')?.path;
    for (const path of sent && sent !== settings.mailbox ? [settings.mailbox, sent] : [settings.mailbox]) {
      const lock = await client.getMailboxLock(path);
      try {
        const query = { header: { 'message-id': messageId }, from: settings.address };
        const found = (await client.search(query, { uid: true })) || [];
        if (found.length > 0) return true;
      } finally {
        lock.release();
      }
    }
    return false;
  });
}
