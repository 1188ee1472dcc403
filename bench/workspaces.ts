/**
 * Workspaces as chains in the blob store, against baselines from the same run:
 *  - commit: a warm bound session's turn that writes 1 MiB (and one that writes nothing),
 *    message accepted → reply, on two hosts alternated turn by turn, one with `file` blobs
 *    (the data dir, the one-machine default) and one with `s3` blobs (a real radosgw on a
 *    one-node Ceph, started here). The difference of the 1 MiB turns is what the upload
 *    of the sealed layer costs a commit; the empty turns, which upload nothing, show the
 *    hosts are otherwise alike.
 *  - materialise: a 100 MiB workspace of 1,000 files, snapshotted into s3, brought onto a
 *    machine that has none (a second data dir), against a plain download of the same
 *    object with the same client into one file.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { type BlobStore, openBlobStore } from '../src/blobs/index.js';
import { startS3Service } from '../src/chaos/index.js';
import { SANDBOX_USER } from '../src/runtime/index.js';
import { Workspaces } from '../src/workspace/index.js';
import { type BenchOptions, benchHost, round, stats, timedMessage } from './harness.js';

const MiB = 1024 * 1024;
const BUCKET = 'berth-bench';
const SANDBOX_UID = Number(SANDBOX_USER.split(':')[0]);

export async function workspaces({ quick }: BenchOptions) {
  const s3 = await startS3Service();
  try {
    await s3.createBucket(BUCKET);
    const commit = await commitOverhead(s3.env(), quick ? 10 : 60);
    const blobs = await openBlobStore({
      kind: 's3',
      bucket: BUCKET,
      prefix: 'materialise/',
      endpoint: s3.endpoint,
      region: s3.region,
      accessKeyId: s3.accessKeyId,
      secretAccessKey: s3.secretAccessKey,
    });
    try {
      const materialise = await materialiseOnEmptyMachine(
        blobs,
        quick ? 10 * MiB : 100 * MiB,
        quick ? 100 : 1000,
      );
      return { bench: 'workspaces', commit, materialise };
    } finally {
      await blobs.close();
    }
  } finally {
    await s3.remove();
  }
}

async function commitOverhead(s3Env: Record<string, string>, turns: number) {
  const file = await benchHost({ BERTH_IDLE_TIMEOUT: '10m' }, 1);
  const s3 = await benchHost(
    { BERTH_IDLE_TIMEOUT: '10m', ...s3Env, BERTH_BLOBS: `s3://${BUCKET}/commit` },
    1,
  );
  const hosts = { file, s3 };
  try {
    const samples = {
      file: { writes1MiB: [] as number[], writesNothing: [] as number[] },
      s3: { writes1MiB: [] as number[], writesNothing: [] as number[] },
    };
    for (const h of Object.values(hosts)) await timedMessage(h.client, 'c', 'true'); // binds the sandbox
    for (let i = -3; i < turns; i++) {
      for (const name of ['file', 's3'] as const) {
        const { client } = hosts[name];
        const wrote = await timedMessage(client, 'c', `head -c ${MiB} /dev/urandom > f-${i + 3}.bin`);
        const nothing = await timedMessage(client, 'c', 'true');
        if (i < 0) continue; // warm-up
        samples[name].writes1MiB.push(wrote.replyMs);
        samples[name].writesNothing.push(nothing.replyMs);
      }
    }
    const of = (name: 'file' | 's3') => ({
      writes1MiBMessageToReplyMs: stats(samples[name].writes1MiB),
      writesNothingMessageToReplyMs: stats(samples[name].writesNothing),
    });
    const file1 = stats(samples.file.writes1MiB).p50;
    const s31 = stats(samples.s3.writes1MiB).p50;
    return {
      turns,
      file: of('file'),
      s3: of('s3'),
      s3UploadCostP50Ms: round(s31 - file1),
      ratioS3ToFile1MiBP50: round(s31 / file1),
    };
  } finally {
    await file.close();
    await s3.close();
  }
}

async function materialiseOnEmptyMachine(blobs: BlobStore, totalBytes: number, files: number) {
  const root = await mkdtemp(join(tmpdir(), 'berth-bench-materialise-'));
  try {
    const sessionId = 'm';
    // The machine that wrote it: its committed tree, adopted as version 1 and snapshotted.
    const writer = new Workspaces(join(root, 'writer'), SANDBOX_UID, blobs);
    const tree = writer.committedPath(sessionId);
    const perFile = Math.floor(totalBytes / files);
    for (let i = 0; i < files; i++) {
      const dir = join(tree, `d${i % 20}`);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, `f${i}.bin`), randomBytes(perFile));
    }
    await writer.ensureCurrent({ sessionId, version: 1, entries: [] });
    const snapshot = await writer.uploadSnapshot(sessionId);
    if (!snapshot) throw new Error('no snapshot of the written tree');
    const chain = {
      sessionId,
      version: 1,
      entries: [{ ...snapshot, kind: 'snapshot' as const, turnId: null }],
    };

    const downloadMs: number[] = [];
    const materialiseMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const plain = join(root, `download-${i}`);
      let t0 = performance.now();
      await pipeline((await blobs.get(snapshot.key)).body, createWriteStream(plain));
      downloadMs.push(performance.now() - t0);
      await rm(plain);

      // A machine with none of it: a data dir of its own.
      const reader = new Workspaces(join(root, `reader-${i}`), SANDBOX_UID, blobs);
      t0 = performance.now();
      const ensured = await reader.ensureCurrent(chain);
      materialiseMs.push(performance.now() - t0);
      if (ensured.how !== 'materialised') throw new Error(`expected a materialisation, got ${ensured.how}`);
      await rm(join(root, `reader-${i}`), { recursive: true });
    }
    const d = stats(downloadMs);
    const m = stats(materialiseMs);
    return {
      files,
      treeBytes: perFile * files,
      snapshotObjectBytes: snapshot.size,
      plainDownloadOfTheObjectMs: d,
      materialiseMs: m,
      ratioMaterialiseToDownloadP50: round(m.p50 / d.p50),
    };
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}
