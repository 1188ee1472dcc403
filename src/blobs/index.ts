/** blobs: the blob store (file or s3) and mediated storage's objects in it. */
export {
  assertBlobKey,
  BLOB_GRACE_MS,
  type BlobInfo,
  type BlobPage,
  type BlobRead,
  type BlobStore,
  type ByteRange,
  collectGarbage,
  type PutOptions,
  type PutResult,
} from './blob-store.js';
export { FileBlobStore } from './file-blob-store.js';
export { openBlobStore } from './open-blob-store.js';
// Types only: the s3 backend (and the AWS SDK, slow to load) is imported when a store opens on it.
export type { S3BlobStoreOptions, S3BlobsConfig } from './s3-blob-store.js';
export type { BlobRetry } from './s3-retry.js';
export { STORAGE_BLOB_PREFIX, StorageBlobs, type WrittenBlob } from './storage-blobs.js';
