/**
 * Email as a channel: inbound read over IMAP (email-imap.ts: IDLE, each mail committed by
 * its Message-ID, then flagged \Seen), replies sent over SMTP (nodemailer) from the outbox.
 *
 * A reply answers its mail the way mail clients thread: `Re:` its Subject, In-Reply-To its
 * Message-ID, References its References plus its Message-ID (read back from the mailbox at
 * send time; a mail deleted meanwhile still gets In-Reply-To and References). Its own
 * Message-ID is made from the outbox key (email-message.ts), and the bot's address is one
 * of its envelope recipients: the server accepts a mail for all its recipients at once, so
 * once the SMTP transaction ended with 250 the bot's copy will arrive in its own mailbox.
 * A send that was taken before (a crash may have come between its send and its record)
 * looks there first (and in the Sent mailbox) for its Message-ID, and records it without
 * sending again when found. Files go both ways: a mail's attachments reach `inbox/`, and a
 * file a turn writes under `outbox/` is a mail of its own in the thread, attached. The
 * password is the channel's token secret; it stays here.
 */
import { Readable } from 'node:stream';
import nodemailer from 'nodemailer';
import type { Channel, ChannelAttachment, EmailSettings } from '../core/index.js';
import {
  type ChannelEvent,
  type ChannelFile,
  type ChannelSecrets,
  type ChannelSend,
  fileBytes,
  type PlatformClient,
  type PlatformClientFactory,
} from './channel.js';
import { downloadAttachment, listenMailbox, mailboxHolds, mailFailure, readOriginal } from './email-imap.js';
import { replyReferences, replySubject, sendMessageId } from './email-message.js';

/** One mail carries a long reply whole: parts would be separate mails. */
export const EMAIL_MAX_TEXT = 200_000;
/** The largest file either way: mail servers commonly refuse messages over 25 MB, base64 makes a file a third larger. */
export const EMAIL_MAX_FILE_BYTES = 18 * 2 ** 20;

export class EmailClient implements PlatformClient {
  readonly platform = 'email' as const;
  readonly maxTextLength = EMAIL_MAX_TEXT;
  readonly maxFileBytes = EMAIL_MAX_FILE_BYTES;

  constructor(
    private readonly channelId: string,
    private readonly settings: EmailSettings,
    private readonly password: string,
  ) {}

  listen(commit: (event: ChannelEvent) => Promise<void>, signal: AbortSignal): Promise<void> {
    return listenMailbox(this.settings, this.password, commit, signal);
  }

  send(message: ChannelSend, signal: AbortSignal): Promise<string> {
    return this.mail(message, [], signal);
  }

  async sendFile(message: ChannelSend, file: ChannelFile, signal: AbortSignal): Promise<string> {
    const content = await fileBytes(file);
    return this.mail(
      { ...message, text: `${file.name} (${file.size} bytes) is attached.` },
      [{ filename: file.name, content }],
      signal,
    );
  }

  async download(attachment: ChannelAttachment, signal: AbortSignal): Promise<AsyncIterable<Uint8Array>> {
    const bytes = await downloadAttachment(
      this.settings,
      this.password,
      attachment,
      this.maxFileBytes,
      signal,
    );
    return Readable.from([bytes]);
  }

  /** One mail in the thread of the mail it answers, sent once per outbox key (its Message-ID). */
  private async mail(
    message: ChannelSend,
    attachments: { filename: string; content: Buffer }[],
    signal: AbortSignal,
  ): Promise<string> {
    const { settings } = this;
    const messageId = sendMessageId(this.channelId, message.key, settings.address);
    const original =
      message.replyTo === null ? null : await readOriginal(settings, this.password, message.replyTo, signal);
    const transport = nodemailer.createTransport({
      host: settings.smtpHost,
      port: settings.smtpPort,
      secure: settings.smtpSecurity === 'tls',
      requireTLS: settings.smtpSecurity === 'starttls',
      ignoreTLS: settings.smtpSecurity === 'none',
      auth: { user: settings.user, pass: this.password },
      connectionTimeout: 30_000,
      socketTimeout: 60_000,
    });
    const onAbort = () => transport.close();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await transport.sendMail({
        from: settings.address,
        to: message.chatId,
        subject: replySubject(original?.subject ?? null),
        text: message.text,
        attachments,
        messageId,
        ...(message.replyTo === null
          ? {}
          : {
              inReplyTo: message.replyTo,
              references: replyReferences(original?.references, message.replyTo),
            }),
        // RFC 3834: an automatic answer, so other robots (vacation responders) do not answer it.
        headers: { 'Auto-Submitted': 'auto-replied' },
        // The bot's own copy is how a send is found again after a crash (findSent).
        envelope: { from: settings.address, to: [message.chatId, settings.address] },
      });
      return messageId;
    } catch (err) {
      throw mailFailure(err, 'SMTP');
    } finally {
      signal.removeEventListener('abort', onAbort);
      transport.close();
    }
  }

  async findSent(message: ChannelSend, signal: AbortSignal): Promise<string | null> {
    const messageId = sendMessageId(this.channelId, message.key, this.settings.address);
    return (await mailboxHolds(this.settings, this.password, messageId, signal)) ? messageId : null;
  }

  /** Mail has no typing indicator. */
  async showTyping(): Promise<void> {}
}

/** The email client of a channel; the token is the mailbox's password. */
export function emailClientFactory(): PlatformClientFactory {
  return (channel: Channel, { token: password }: ChannelSecrets) => {
    if (channel.email === null)
      throw new Error(`Channel ${channel.id} is an email channel without mail settings (emailClientFactory)`);
    return new EmailClient(channel.id, channel.email, password);
  };
}
