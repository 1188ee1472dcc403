/**
 * The s3 backend against a real radosgw, where S3 differs from a dir: a start that
 * refuses a misconfigured service (in the library and through `berth up` / `berth
 * worker`), radosgw SIGKILLed during reads (retried, resumed, whole after its restart)
 * and during an upload (a retryable error, nothing partial visible), and the test
 * service's own promise: `remove()` leaves no process, file or mount.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BLOB_GRACE_MS, type BlobStore, openBlobStore } from '../src/blobs/index.js';
import { S3BlobStore } from '../src/blobs/s3-blob-store.js';
import { BERTH_BIN, freePort, readProcIfAlive, startS3Service } from '../src/chaos/index.js';
import { type BerthError, isBerthError } from '../src/core/index.js';
import { freshBucket, testS3 } from './helpers/s3.js';

const MiB = 1024 * 1024;
const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function failure(call: Promise<unknown>): Promise<BerthError> {
  try {
    await call;
  } catch (err) {
    if (isBerthError(err)) return err;
    throw err;
  }
  assert.fail('expected a BerthError');
}

async function readAll(blobs: BlobStore, key: string): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of (await blobs.get(key)).body) parts.push(part as Buffer);
  return Buffer.concat(parts);
}

test('start-up: a missing bucket, wrong keys or a dead endpoint is BLOBS_UNREACHABLE naming where and the fix', async () => {
  const good = await freshBucket();
  const closedPort = `http://127.0.0.1:${await freePort()}`;
  const cases: [string, typeof good, RegExp, RegExp][] = [
    [
      'missing bucket',
      { ...good, bucket: 'berth-missing' },
      /berth-missing does not exist at http:\/\/127/,
      /^Create it/,
    ],
    [
      'wrong secret',
      { ...good, secretAccessKey: 'wrong' },
      /refused the keys for bucket berth-test/,
      /AWS_SECRET_ACCESS_KEY/,
    ],
    ['unknown key id', { ...good, accessKeyId: 'NOSUCHKEY' }, /refused the keys/, /AWS_ACCESS_KEY_ID/],
    [
      'dead endpoint',
      { ...good, endpoint: closedPort },
      /unreachable \(ECONNREFUSED\)/,
      /AWS_ENDPOINT_URL_S3/,
    ],
  ];
  for (const [name, config, reason, fix] of cases) {
    const err = await failure(openBlobStore(config));
    assert.equal(err.code, 'BLOBS_UNREACHABLE', name);
    assert.equal(err.retryable, true);
    assert.ok(err.message.includes(`s3://${config.bucket}/`), `${name}: names the bucket: ${err.message}`);
    assert.match(err.message, reason, name);
    assert.match(err.hint, fix, name);
  }
  const blobs = await openBlobStore(good);
  assert.deepEqual((await blobs.list('')).objects, [], 'the start-up probe leaves nothing');
  await blobs.close();
});

test('berth up and berth worker refuse to start against a missing bucket, with one line and the fix', async () => {
  const s3 = await testS3();
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-blobs-cli-'));
  try {
    for (const command of ['up', 'worker']) {
      const r = spawnSync(process.execPath, [BERTH_BIN, command, '--blobs', 's3://berth-nowhere/x'], {
        env: { PATH: process.env.PATH, BERTH_DATA: dataDir, BERTH_PORT: '0', ...s3.env() },
        encoding: 'utf8',
        timeout: 60_000,
      });
      assert.equal(r.status, 1, `${command}: ${r.stderr}`);
      const lines = r.stderr.split('\n').filter((l) => l.startsWith('berth: '));
      assert.equal(lines.length, 1, r.stderr);
      assert.match(
        lines[0]!,
        new RegExp(
          `^berth: Blob store s3://berth-nowhere/x/: bucket berth-nowhere does not exist at ${s3.endpoint}\\. Fix: Create it .*--blobs`,
        ),
      );
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('radosgw SIGKILLed during reads: a read in flight resumes, a new one is retried, both whole after the restart', async () => {
  const s3 = await testS3();
  const blobs = await openBlobStore(await freshBucket());
  const body = randomBytes(12 * MiB);
  await blobs.put('k/big', [body], { maxBytes: body.length });
  await blobs.put('k/small', [Buffer.from('small')], { maxBytes: 10 });

  const inFlight = (await blobs.get('k/big')).body;
  const iterator = inFlight[Symbol.asyncIterator]();
  const first = (await iterator.next()).value as Buffer;
  await s3.kill();
  const restarted = (async () => {
    await sleep(1500);
    await s3.restart();
  })();
  const fresh = readAll(blobs, 'k/small');
  const headWhileDown = blobs.head('k/small');
  const rest: Buffer[] = [first];
  for (let next = await iterator.next(); !next.done; next = await iterator.next())
    rest.push(next.value as Buffer);
  await restarted;
  assert.equal(sha256(Buffer.concat(rest)), sha256(body), 'the read in flight is whole');
  assert.equal((await fresh).toString(), 'small');
  assert.equal((await headWhileDown)?.size, 5);
  await blobs.close();
});

test('radosgw SIGKILLed during an upload: BLOB_WRITE_FAILED (retryable), nothing of it visible; retries end', async () => {
  const s3 = await testS3();
  const config = await freshBucket();
  const blobs = await openBlobStore(config);
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const upload = failure(
    blobs.put(
      'k/cut',
      (async function* () {
        yield randomBytes(9 * MiB); // the first part goes out
        await gate;
        yield randomBytes(9 * MiB);
      })(),
      { maxBytes: 100 * MiB },
    ),
  );
  await sleep(500);
  await s3.kill();
  release();
  const err = await upload;
  assert.equal(err.code, 'BLOB_WRITE_FAILED');
  assert.equal(err.retryable, true);

  // With the service down, retries end in the retryable catalogue errors.
  const impatient = new S3BlobStore(config, { retry: { tries: 2, firstMs: 10, maxMs: 10 } });
  assert.equal((await failure(impatient.get('k/cut'))).code, 'BLOB_READ_FAILED');
  assert.equal(
    (await failure(impatient.put('k/x', [Buffer.from('x')], { maxBytes: 1 }))).code,
    'BLOB_WRITE_FAILED',
  );
  await impatient.close();

  await s3.restart();
  assert.equal(await blobs.head('k/cut'), null);
  assert.deepEqual((await blobs.list('k/')).objects, []);
  // What the dead upload left (its parts) is invisible, and aborted once old.
  assert.ok((await blobs.abortIncomplete(Date.now() + BLOB_GRACE_MS)) <= 1);
  assert.equal(await blobs.abortIncomplete(Date.now() + BLOB_GRACE_MS), 0);
  await blobs.close();
});

test('a multipart put slower than refreshAfterMs is re-copied onto itself: its age counts from its end', async () => {
  const blobs = new S3BlobStore(await freshBucket(), { refreshAfterMs: 0 });
  const body = randomBytes(9 * MiB);
  await blobs.put('k/slow', [body], { maxBytes: body.length });
  const done = Date.now();
  const head = await blobs.head('k/slow');
  assert.equal(head?.size, body.length);
  assert.ok(head!.lastModifiedMs >= done - 2000, 'LastModified is the end of the put');
  assert.equal(sha256(await readAll(blobs, 'k/slow')), sha256(body));
  await blobs.close();
});

test('the test S3 service: remove() leaves no process, no file and no mount', async () => {
  const s3 = await startS3Service();
  const pids = Object.values(s3.pids());
  assert.equal(pids.length, 3, 'mon, osd and radosgw run');
  const rss = await s3.rssBytes();
  assert.ok(Object.values(rss).every((b) => b > 0));
  await s3.kill();
  assert.equal(s3.pids().rgw, undefined, 'kill() ends radosgw');
  await s3.restart();
  await s3.createBucket('berth-after-restart');
  pids.push(s3.pids().rgw!);
  await s3.remove();
  await s3.remove(); // idempotent
  for (const pid of pids) assert.throws(() => process.kill(pid, 0), /ESRCH/, `pid ${pid} is gone`);
  assert.equal(existsSync(s3.dir), false, 'its dir is gone');
  assert.ok(!(await readFile('/proc/mounts', 'utf8')).includes(s3.dir), 'no mount under it');
  const leftovers: string[] = [];
  for (const pid of (await readdir('/proc')).filter((p) => /^\d+$/.test(p))) {
    if ((await readProcIfAlive(`/proc/${pid}/cmdline`))?.includes(s3.dir)) leftovers.push(pid);
  }
  assert.deepEqual(leftovers, [], 'no process names its dir');
});
