/** storage: the files behind mediated storage (issue 7); keys, grants and rows live in core and the store. */
export { BLOB_GRACE_MS, BlobStore, type WrittenBlob } from './blob-store.js';
