/**
 * The blob store's two backends through the BlobStore interface, in the same run: 4 KiB
 * and 10 MiB puts and gets on `file` (a temp dir of this machine's disk, fsync'd: the
 * baseline) and on `s3` (a real radosgw on a one-node Ceph with a memstore OSD, started
 * here), alternated so both see the same machine load. A 10 MiB put is a multipart upload
 * on s3 (two parts). Each object is deleted after its get (untimed), so the memstore OSD
 * holds little. Also the S3 service's bring-up, step by step, and the resident memory of
 * its daemons when idle after bring-up and after the run.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BlobStore, openBlobStore } from '../src/blobs/index.js';
import { startS3Service } from '../src/chaos/index.js';
import { type BenchOptions, round, stats } from './harness.js';

const KiB = 1024;
const MiB = 1024 * KiB;

async function* chunks(body: Buffer, size = 64 * KiB): AsyncGenerator<Buffer> {
  for (let i = 0; i < body.length; i += size) yield body.subarray(i, i + size);
}

async function timedPut(blobs: BlobStore, key: string, body: Buffer): Promise<number> {
  const t0 = performance.now();
  await blobs.put(key, chunks(body), { maxBytes: body.length });
  return performance.now() - t0;
}

async function timedGet(blobs: BlobStore, key: string, size: number): Promise<number> {
  const t0 = performance.now();
  let bytes = 0;
  for await (const part of (await blobs.get(key)).body) bytes += (part as Buffer).length;
  if (bytes !== size) throw new Error(`read ${bytes} of ${size} bytes of ${key}`);
  return performance.now() - t0;
}

export async function blobs({ quick }: BenchOptions) {
  const started = performance.now();
  const s3 = await startS3Service();
  const bringUpMs = round(performance.now() - started);
  const idleRss = await s3.rssBytes();
  const dir = await mkdtemp(join(tmpdir(), 'berth-bench-blobs-'));
  try {
    await s3.createBucket('berth-bench');
    const file = await openBlobStore({ kind: 'file', dir });
    const remote = await openBlobStore({
      kind: 's3',
      bucket: 'berth-bench',
      prefix: 'bench/',
      endpoint: s3.endpoint,
      region: s3.region,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    });
    const backends = { file, s3: remote };
    const result: Record<string, Record<string, ReturnType<typeof stats>>> = { file: {}, s3: {} };
    for (const [label, size, n] of [
      ['4KiB', 4 * KiB, quick ? 50 : 500],
      ['10MiB', 10 * MiB, quick ? 5 : 40],
    ] as const) {
      const body = randomBytes(size);
      const samples = {
        file: { put: [] as number[], get: [] as number[] },
        s3: { put: [] as number[], get: [] as number[] },
      };
      for (let i = -3; i < n; i++) {
        for (const name of ['file', 's3'] as const) {
          const key = `${label}/${i + 3}`;
          const put = await timedPut(backends[name], key, body);
          const get = await timedGet(backends[name], key, size);
          await backends[name].delete(key);
          if (i < 0) continue; // warm-up
          samples[name].put.push(put);
          samples[name].get.push(get);
        }
      }
      for (const name of ['file', 's3'] as const) {
        result[name]![`put${label}Ms`] = stats(samples[name].put);
        result[name]![`get${label}Ms`] = stats(samples[name].get);
      }
    }
    const afterRss = await s3.rssBytes();
    await file.close();
    await remote.close();
    const mib = (b: number | undefined) => round((b ?? 0) / MiB);
    const rssMiB = (rss: typeof idleRss) => ({
      mon: mib(rss.mon),
      osd: mib(rss.osd),
      rgw: mib(rss.rgw),
      total: mib((rss.mon ?? 0) + (rss.osd ?? 0) + (rss.rgw ?? 0)),
    });
    return {
      bench: 'blobs',
      baselineFile: result.file,
      s3: result.s3,
      s3Service: {
        bringUpMs,
        bringUpStepsMs: s3.bringUpMs,
        idleRssMiB: rssMiB(idleRss),
        afterRunRssMiB: rssMiB(afterRss),
      },
    };
  } finally {
    await s3.remove();
    await rm(dir, { recursive: true, force: true });
  }
}
