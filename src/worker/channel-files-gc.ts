/**
 * The garbage pass over chat files (`channel-files/…`): deletes the blobs no row still needs
 * (core/channel-files.ts says which) once past their grace. The needed keys are read once per
 * pass, before the listing: a file named after that read is younger than the grace (its row
 * is written moments after its put), so it is not touched.
 */
import { type BlobStore, collectGarbage } from '../blobs/index.js';
import { CHANNEL_FILES_GRACE_MS, CHANNEL_FILES_PREFIX, neededChannelFiles } from '../core/index.js';
import type { WorkerStore } from '../store/index.js';

/** How many chat files it deleted. */
export async function collectChannelFiles(
  store: Pick<WorkerStore, 'channelFileUses'>,
  blobs: BlobStore,
  now: number,
): Promise<number> {
  const needed = neededChannelFiles(await store.channelFileUses());
  return collectGarbage(blobs, {
    prefix: CHANNEL_FILES_PREFIX,
    isNamed: async (key) => needed.has(key),
    now,
    graceMs: CHANNEL_FILES_GRACE_MS,
  });
}
