/** The one BlobStore conformance suite, run unchanged against the file backend and a real radosgw (S3). */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { openBlobStore } from '../src/blobs/index.js';
import { runBlobStoreConformance } from './blobs/conformance.js';
import { freshBucket } from './helpers/s3.js';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

runBlobStoreConformance('file', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'berth-blobs-'));
  dirs.push(dir);
  return openBlobStore({ kind: 'file', dir: join(dir, 'blobs') });
});

// Under a key prefix, as a bucket shared with other tools would be used.
runBlobStoreConformance('s3 (radosgw)', async () => openBlobStore(await freshBucket('berth/')));
