/** The configured blob store, checked: what `berth up` and `berth worker` open before anything else. */
import type { BlobsConfig } from '../core/index.js';
import type { BlobStore } from './blob-store.js';
import { FileBlobStore } from './file-blob-store.js';
import type { S3BlobStoreOptions } from './s3-blob-store.js';

/** BLOBS_UNREACHABLE, naming the dir or the endpoint and bucket and the fix, when it cannot be used. */
export async function openBlobStore(
  config: BlobsConfig,
  options: S3BlobStoreOptions = {},
): Promise<BlobStore> {
  // Loaded only for s3: the AWS SDK takes seconds to import on a small machine, and every CLI command imports this.
  const blobs =
    config.kind === 'file'
      ? new FileBlobStore(config.dir)
      : new (await import('./s3-blob-store.js')).S3BlobStore(config, options);
  try {
    await blobs.check();
  } catch (err) {
    await blobs.close();
    throw err;
  }
  return blobs;
}
