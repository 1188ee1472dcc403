/** The rows that name chat files, for their garbage collection (core/channel-files.ts). */
import {
  type ChannelFileUse,
  type ChannelOutboxStatus,
  type InboxFile,
  inboxFilesOf,
  type MessageStatus,
} from '../../../core/index.js';
import { all, type Program } from '../program.js';

export function* channelFileUses(): Program<ChannelFileUse[]> {
  const uses: ChannelFileUse[] = [];
  for (const r of yield* all('CHANNEL_FILES_OF_MESSAGES', {})) {
    const status = String(r.status) as MessageStatus;
    for (const f of inboxFilesOf(JSON.parse(String(r.data))))
      uses.push({ key: f.key, holder: 'message', status });
  }
  for (const r of yield* all('CHANNEL_FILES_OF_OUTBOX', {})) {
    const file = JSON.parse(String(r.file)) as InboxFile;
    uses.push({ key: file.key, holder: 'outbox', status: String(r.status) as ChannelOutboxStatus });
  }
  return uses;
}
