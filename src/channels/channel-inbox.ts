/**
 * The files sent with a chat message, stored before the message is committed: each one
 * fetched from the platform and put into the blob store under a key made of the channel,
 * the chat and the message (so a re-read after a crash puts the same key, once), then
 * named in the message (`files`, which the commit writes into its data) with a note line
 * in its text, so that the agent knows where to look. The worker places them in the
 * workspace when the turn starts (core/inbox.ts). Only an allowed sender's files are
 * fetched: a stranger's message is refused without them.
 *
 * A file over the limit (the agent's workspace quota, or what the platform lets a bot
 * fetch, whichever is smaller), or one the platform refuses to hand over, is left out: the
 * message still goes, with a note saying so, and the user gets one short notice naming the
 * limit. A fetch that fails for a passing reason throws, so the update is read again.
 */
import type { BlobStore } from '../blobs/index.js';
import {
  CHANNEL_FILES_PREFIX,
  type Channel,
  type ChannelInbound,
  type InboxFile,
  inboxNote,
  inboxRefusal,
  isBerthError,
  isChannelSenderAllowed,
  safeInboxName,
  uniqueInboxName,
} from '../core/index.js';
import type { ChannelRunnerStore } from '../store/index.js';
import { type PlatformClient, platformFailureOf } from './channel.js';

export interface ChannelInboxDeps {
  store: Pick<ChannelRunnerStore, 'getAgent' | 'channelEventApplied'>;
  blobs: BlobStore;
}

const keySegment = (id: string) => id.replace(/[^A-Za-z0-9_-]/g, '_');

/** `inbound` with its files stored and named, and notes for what was left out; as it is when it carries none. */
export async function stageChannelFiles(
  deps: ChannelInboxDeps,
  channel: Pick<Channel, 'id' | 'agent'>,
  client: PlatformClient,
  inbound: ChannelInbound,
  signal: AbortSignal,
): Promise<ChannelInbound> {
  const attachments = inbound.attachments ?? [];
  if (attachments.length === 0 || !client.download) return inbound;
  const limitBytes = await fileLimitBytes(deps, channel, client);
  const files: InboxFile[] = [];
  const notes: string[] = [];
  const refused: string[] = [];
  const taken = new Set<string>();
  for (const [i, attachment] of attachments.entries()) {
    const name = uniqueInboxName(safeInboxName(attachment.name, `file-${i + 1}`), taken);
    taken.add(name);
    const leaveOut = (why: string) => {
      notes.push(`# ${why}`);
      refused.push(why);
    };
    if (attachment.sizeBytes !== null && attachment.sizeBytes > limitBytes) {
      leaveOut(inboxRefusal(name, attachment.sizeBytes, limitBytes));
      continue;
    }
    let body: AsyncIterable<Uint8Array>;
    try {
      body = await client.download(attachment, signal);
    } catch (err) {
      const failure = platformFailureOf(err);
      if (failure.kind !== 'refused') throw err;
      leaveOut(`not attached: ${name} (${failure.description})`);
      continue;
    }
    const key = `${CHANNEL_FILES_PREFIX}${keySegment(channel.id)}/${keySegment(inbound.chatId)}-${keySegment(inbound.messageId)}-${i}`;
    try {
      const put = await deps.blobs.put(key, body, { maxBytes: limitBytes, ifAbsent: true });
      files.push({ name, key, size: put.size });
      notes.push(inboxNote({ name, size: put.size }));
    } catch (err) {
      // The platform did not say its size, and it was too big: left out like one that did.
      if (!isBerthError(err, 'BLOB_TOO_LARGE')) throw err;
      leaveOut(inboxRefusal(name, null, limitBytes));
    }
  }
  return {
    ...inbound,
    text: [inbound.text, ...notes].filter((line) => line !== '').join('\n'),
    files,
    ...(refused.length > 0
      ? { notice: `Sorry, ${refused.join('; ')}. The message went on without it.` }
      : {}),
  };
}

/**
 * How long a pushed message's files may take to fetch and store (an API route's, which the
 * platform does not wait for: it delivers again, and the repeat is acknowledged).
 */
export const PUSHED_FILES_TIMEOUT_MS = 120_000;

/**
 * `inbound` with its files staged when its sender is allowed (a stranger's are never
 * fetched) and its event `eventId` was not applied yet; as it is otherwise. An event id is
 * delivered again by design (Discord's read-back after a reconnect, a push retried, a mail
 * read again after a crash): its commit finds it a duplicate, and fetching its files first
 * would be for nothing. `eventId` is null for a polled update, which its cursor fences.
 */
export async function stageAllowedFiles(
  deps: ChannelInboxDeps,
  channel: Channel,
  client: PlatformClient,
  inbound: ChannelInbound,
  eventId: string | null,
  signal: AbortSignal,
): Promise<ChannelInbound> {
  if (!inbound.attachments?.length || !isChannelSenderAllowed(channel, inbound)) return inbound;
  if (eventId !== null && (await deps.store.channelEventApplied(channel.id, eventId))) return inbound;
  return stageChannelFiles(deps, channel, client, inbound, signal);
}

/** The smaller of the agent's workspace quota and what the platform lets a bot fetch. */
async function fileLimitBytes(
  deps: ChannelInboxDeps,
  channel: Pick<Channel, 'agent'>,
  client: PlatformClient,
): Promise<number> {
  const agent = await deps.store.getAgent(channel.agent);
  const quota = agent ? agent.workspaceMb * 2 ** 20 : Number.POSITIVE_INFINITY;
  return Math.min(quota, client.maxFileBytes ?? Number.POSITIVE_INFINITY);
}
