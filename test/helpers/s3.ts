/** One throw-away S3 service (radosgw on a one-node Ceph) per test file, a fresh bucket for each store a test opens. */
import { after } from 'node:test';
import type { S3BlobsConfig } from '../../src/blobs/index.js';
import { type S3Service, startS3Service } from '../../src/chaos/index.js';

let service: Promise<S3Service> | undefined;
let buckets = 0;

// Registered when a test file imports this module: a file-level hook, run after all its tests.
after(async () => {
  if (service) await (await service).remove();
});

/** Starts the file's service on first use; it is removed after the file's tests. */
export function testS3(): Promise<S3Service> {
  service ??= startS3Service();
  return service;
}

/** The blobs config of a new, empty bucket of the file's service (`prefix` inside it). */
export async function freshBucket(prefix = ''): Promise<S3BlobsConfig> {
  const s3 = await testS3();
  buckets += 1;
  const bucket = `berth-test-${process.pid}-${buckets}`;
  await s3.createBucket(bucket);
  return {
    kind: 's3',
    bucket,
    prefix,
    endpoint: s3.endpoint,
    region: s3.region,
    accessKeyId: s3.accessKeyId,
    secretAccessKey: s3.secretAccessKey,
  };
}
