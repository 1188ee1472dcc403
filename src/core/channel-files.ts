/**
 * When the blobs of chat files (`channel-files/…`, docs/channels.md) may go. A file a user
 * sent is needed until its message is done with: committed (the file is then in the
 * workspace's chain), or failed, cancelled, interrupted, or gone with its session. A file a
 * turn wrote to `outbox/` is needed until its outbox row is sent or dead. Every other blob
 * under the prefix, once past the grace, is garbage: among them the files stored for a
 * message whose commit never came (the runner crashed in between).
 */
import type { ChannelOutboxStatus } from './channel.js';
import type { MessageStatus } from './types.js';

/** Where chat files live in the blob store. */
export const CHANNEL_FILES_PREFIX = 'channel-files/';
/**
 * A chat file younger than this is never collected: a message's files are stored one by
 * one before its commit (a big file's fetch may take minutes), so a young file no row names
 * yet may be on its way to being named.
 */
export const CHANNEL_FILES_GRACE_MS = 24 * 3_600_000;

/** A row that names a chat file: an inbound message (its data's inbox) or an outbox row (its file). */
export type ChannelFileUse =
  | { key: string; holder: 'message'; status: MessageStatus }
  | { key: string; holder: 'outbox'; status: ChannelOutboxStatus };

/** Whether the row still needs its file: a message not yet done with, an outbox row not yet sent or dead. */
export function usesChannelFile(use: ChannelFileUse): boolean {
  return use.holder === 'message'
    ? use.status === 'pending' || use.status === 'processing'
    : use.status === 'pending';
}

/** The keys some row still needs (garbage collection keeps them, whatever their age). */
export function neededChannelFiles(uses: readonly ChannelFileUse[]): Set<string> {
  return new Set(uses.filter(usesChannelFile).map((u) => u.key));
}
