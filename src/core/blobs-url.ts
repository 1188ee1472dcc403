/**
 * BERTH_BLOBS: where the blob store is. `file:///dir` (absolute) or `s3://bucket[/prefix]`;
 * the S3 service's endpoint, region and keys come from the AWS variables (config-options.ts),
 * joined to it by blobsConfigOf (config.ts). Pure: parsing only.
 */
import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where blobs live (the content of mediated-storage objects): a dir on this machine, or a
 * bucket of an S3-compatible service that workers on many machines share.
 */
export type BlobsConfig =
  | { readonly kind: 'file'; readonly dir: string }
  | {
      readonly kind: 's3';
      readonly bucket: string;
      /** '' or ending in '/': every key berth writes is under it. */
      readonly prefix: string;
      /** '' = AWS S3 of `region`; otherwise that service, addressed path-style (Ceph RGW, MinIO). */
      readonly endpoint: string;
      readonly region: string;
      readonly accessKeyId: string;
      /** Never logged. */
      readonly secretAccessKey: string;
    };

const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const S3_PREFIX = /^([A-Za-z0-9_-][A-Za-z0-9._-]*\/)*([A-Za-z0-9_-][A-Za-z0-9._-]*)?$/;
export const BLOBS_URL_RULE =
  'use file:///absolute/dir, or s3://bucket or s3://bucket/prefix (bucket: 3-63 of a-z 0-9 . -; prefix: segments of A-Z a-z 0-9 . _ -), or leave it empty for file blobs in the data dir';

/** Where BERTH_BLOBS points: a dir, or a bucket and the key prefix ('' or ending in '/') in it. */
export type BlobsLocation = { kind: 'file'; dir: string } | { kind: 's3'; bucket: string; prefix: string };

/** BERTH_BLOBS as a location; null when it is neither a file:/// dir nor an s3:// bucket. */
export function parseBlobsUrl(url: string): BlobsLocation | null {
  if (url.startsWith('file://')) {
    try {
      const dir = fileURLToPath(url);
      return isAbsolute(dir) ? { kind: 'file', dir: resolve(dir) } : null;
    } catch {
      return null;
    }
  }
  const m = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(url);
  if (!m || !S3_BUCKET.test(m[1]!)) return null;
  const path = (m[2] ?? '').replace(/\/+$/, '');
  if (!S3_PREFIX.test(path)) return null;
  return { kind: 's3', bucket: m[1]!, prefix: path === '' ? '' : `${path}/` };
}
