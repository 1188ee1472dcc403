/**
 * The BlobStore conformance suite: every backend must pass it unchanged (file on a temp
 * dir, s3 on a real radosgw). It checks what a reader can see after each put, never how
 * a backend stores it: whole or absent, immutable under `ifAbsent`, limits that leave
 * nothing behind (not even an unfinished upload), key-ordered paged listings, ranges,
 * and garbage collection that spares young and named objects.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BLOB_GRACE_MS, type BlobStore, collectGarbage } from '../../src/blobs/index.js';
import { isBerthError } from '../../src/core/index.js';

export type OpenBlobs = () => Promise<BlobStore>;

const MiB = 1024 * 1024;
/** Over two of the s3 backend's 8 MiB parts: a multipart upload there. */
const LARGE = 17 * MiB + 12_345;

/** `bytes` in chunks of uneven sizes, as a network delivers them. */
async function* chunked(bytes: Buffer, chunk = 200_003): AsyncGenerator<Buffer> {
  for (let i = 0; i < bytes.length; i += chunk) yield bytes.subarray(i, i + chunk);
}

async function content(
  blobs: BlobStore,
  key: string,
  range?: { start: number; end?: number },
): Promise<Buffer> {
  const read = await blobs.get(key, range);
  const parts: Buffer[] = [];
  for await (const part of read.body) parts.push(part as Buffer);
  const all = Buffer.concat(parts);
  assert.equal(all.length, read.size, 'a read delivers the size it announced');
  return all;
}

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function refusal(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    if (isBerthError(err)) return err.code;
    throw err;
  }
  return 'allowed';
}

async function keys(blobs: BlobStore, prefix: string): Promise<string[]> {
  return (await blobs.list(prefix)).objects.map((o) => o.key);
}

export function runBlobStoreConformance(kind: string, open: OpenBlobs): void {
  describe(`BlobStore conformance: ${kind}`, () => {
    test('put, head, get, list and delete; a missing key is BLOB_NOT_FOUND; delete is idempotent', async () => {
      const blobs = await open();
      const body = Buffer.from('hello blobs');
      const before = Date.now();
      const put = await blobs.put('a/b/c.txt', chunked(body, 3), { maxBytes: 100 });
      assert.deepEqual(put, { key: 'a/b/c.txt', size: body.length, sha256: sha256(body), created: true });
      const head = await blobs.head('a/b/c.txt');
      assert.equal(head?.size, body.length);
      assert.ok(Math.abs(head!.lastModifiedMs - before) < 60_000, 'lastModified is about now');
      assert.deepEqual(await content(blobs, 'a/b/c.txt'), body);
      assert.deepEqual(await keys(blobs, 'a/'), ['a/b/c.txt']);
      await blobs.delete('a/b/c.txt');
      await blobs.delete('a/b/c.txt');
      assert.equal(await blobs.head('a/b/c.txt'), null);
      assert.equal(await refusal(blobs.get('a/b/c.txt')), 'BLOB_NOT_FOUND');
      assert.deepEqual(await keys(blobs, 'a/'), []);
      // Empty objects exist too.
      await blobs.put('empty', chunked(Buffer.alloc(0)), { maxBytes: 0 });
      assert.equal((await blobs.head('empty'))?.size, 0);
      assert.equal((await content(blobs, 'empty')).length, 0);
      await blobs.close();
    });

    test('ranges: inclusive, cut at the end; one that starts past the end is INVALID_INPUT', async () => {
      const blobs = await open();
      const body = randomBytes(1000);
      await blobs.put('r', chunked(body, 77), { maxBytes: 1000 });
      assert.deepEqual(await content(blobs, 'r', { start: 10, end: 19 }), body.subarray(10, 20));
      assert.deepEqual(await content(blobs, 'r', { start: 990 }), body.subarray(990));
      assert.deepEqual(await content(blobs, 'r', { start: 995, end: 5000 }), body.subarray(995));
      const read = await blobs.get('r', { start: 0, end: 0 });
      assert.deepEqual([read.size, read.totalSize], [1, 1000]);
      read.body.destroy();
      assert.equal(await refusal(blobs.get('r', { start: 1000 })), 'INVALID_INPUT');
      await blobs.close();
    });

    test('list: key order across folders, prefixes that are not folders, pages with `after`', async () => {
      const blobs = await open();
      const all = ['p/a-b', 'p/a.c', 'p/a/x', 'p/b', 'p2/c', 'q'];
      for (const key of [...all].reverse()) await blobs.put(key, chunked(Buffer.from(key)), { maxBytes: 10 });
      assert.deepEqual(await keys(blobs, ''), all);
      assert.deepEqual(await keys(blobs, 'p/'), all.slice(0, 4));
      assert.deepEqual(await keys(blobs, 'p'), all.slice(0, 5));
      assert.deepEqual(await keys(blobs, 'p/a'), all.slice(0, 3));
      assert.deepEqual(await keys(blobs, 'p/a/'), ['p/a/x']);
      assert.deepEqual(await keys(blobs, 'zzz/'), []);
      const first = await blobs.list('p/', { limit: 2 });
      assert.deepEqual(
        first.objects.map((o) => [o.key, o.size]),
        [
          ['p/a-b', 5],
          ['p/a.c', 5],
        ],
      );
      assert.equal(first.next, 'p/a.c');
      const second = await blobs.list('p/', { limit: 2, after: first.next! });
      assert.deepEqual(
        second.objects.map((o) => o.key),
        ['p/a/x', 'p/b'],
      );
      assert.equal(second.next, null, 'the last page says so');
      assert.deepEqual(
        (await blobs.list('', { after: 'p/b' })).objects.map((o) => o.key),
        ['p2/c', 'q'],
      );
      await blobs.close();
    });

    test('ifAbsent: a second put of an existing key stores nothing, small or multipart; concurrent puts: one wins', async () => {
      const blobs = await open();
      const one = Buffer.from('one');
      const key = `layers/${sha256(one)}`;
      assert.equal((await blobs.put(key, chunked(one), { maxBytes: 10, ifAbsent: true })).created, true);
      const again = await blobs.put(key, chunked(Buffer.from('two')), { maxBytes: 10, ifAbsent: true });
      assert.deepEqual([again.created, again.sha256], [false, sha256(Buffer.from('two'))]);
      assert.deepEqual(await content(blobs, key), one);

      const large = randomBytes(LARGE);
      const largeKey = `layers/${sha256(large)}`;
      const first = await blobs.put(largeKey, chunked(large), {
        maxBytes: LARGE,
        expectedSha256: sha256(large),
        ifAbsent: true,
      });
      assert.deepEqual([first.created, first.size], [true, LARGE]);
      const other = randomBytes(LARGE);
      assert.equal(
        (await blobs.put(largeKey, chunked(other), { maxBytes: LARGE, ifAbsent: true })).created,
        false,
      );
      assert.equal(sha256(await content(blobs, largeKey)), sha256(large), 'never overwritten');

      const racers = await Promise.all(
        [1, 2, 3, 4, 5].map((n) =>
          blobs.put('race', chunked(Buffer.from(`racer ${n}`)), { maxBytes: 10, ifAbsent: true }),
        ),
      );
      const winners = racers.filter((r) => r.created);
      assert.equal(winners.length, 1, 'exactly one racer created it');
      assert.equal(sha256(await content(blobs, 'race')), winners[0]!.sha256);

      // Without ifAbsent a put replaces (callers use it only for names no other put uses).
      await blobs.put('race', chunked(Buffer.from('replaced')), { maxBytes: 10 });
      assert.equal((await content(blobs, 'race')).toString(), 'replaced');
      await blobs.close();
    });

    test('size limit and hash mismatch: refused, and nothing is left, not even an unfinished upload', async () => {
      const blobs = await open();
      const small = Buffer.from('0123456789A');
      const large = randomBytes(LARGE);
      const cases: [string, Buffer, { maxBytes: number; expectedSha256?: string }, string][] = [
        ['small over', small, { maxBytes: 10 }, 'BLOB_TOO_LARGE'],
        ['large over', large, { maxBytes: LARGE - 1 }, 'BLOB_TOO_LARGE'],
        ['small hash', small, { maxBytes: 100, expectedSha256: sha256(large) }, 'BLOB_HASH_MISMATCH'],
        ['large hash', large, { maxBytes: LARGE, expectedSha256: sha256(small) }, 'BLOB_HASH_MISMATCH'],
      ];
      for (const [name, body, options, code] of cases) {
        assert.equal(
          await refusal(blobs.put(`bad/${name.replace(' ', '-')}`, chunked(body), options)),
          code,
          name,
        );
        assert.equal(
          await blobs.abortIncomplete(Date.now() + BLOB_GRACE_MS),
          0,
          `${name}: nothing unfinished left`,
        );
      }
      assert.deepEqual(await keys(blobs, 'bad/'), []);
      await blobs.close();
    });

    test('multipart-sized object: streamed in, read whole and across the part boundary', async () => {
      const blobs = await open();
      const body = randomBytes(LARGE);
      const put = await blobs.put('big/object', chunked(body, 65_537), { maxBytes: LARGE });
      assert.deepEqual([put.size, put.sha256], [LARGE, sha256(body)]);
      assert.equal((await blobs.head('big/object'))?.size, LARGE);
      assert.equal(sha256(await content(blobs, 'big/object')), sha256(body));
      const boundary = 8 * MiB;
      assert.deepEqual(
        await content(blobs, 'big/object', { start: boundary - 5, end: boundary + 4 }),
        body.subarray(boundary - 5, boundary + 5),
      );
      await blobs.close();
    });

    test('garbage: only unnamed objects past the grace period, and unfinished puts, are collected', async () => {
      const blobs = await open();
      for (const key of ['g/named', 'g/orphan', 'other/orphan'])
        await blobs.put(key, chunked(Buffer.from(key)), { maxBytes: 100 });
      const isNamed = async (key: string) => key === 'g/named';
      assert.equal(await collectGarbage(blobs, { prefix: 'g/', isNamed, now: Date.now() }), 0, 'young: kept');
      const later = Date.now() + 2 * BLOB_GRACE_MS;
      assert.equal(await collectGarbage(blobs, { prefix: 'g/', isNamed, now: later }), 1);
      assert.deepEqual(await keys(blobs, ''), ['g/named', 'other/orphan'], 'named and other prefixes kept');

      // A put cut off mid-body (its writer gone): invisible, and collected once old.
      let cut!: (err: Error) => void;
      let stall!: () => void;
      const writerStalls = new Promise<void>((resolve) => {
        stall = resolve;
      });
      const stalled = blobs.put(
        'g/cut',
        (async function* () {
          yield randomBytes(9 * MiB);
          await new Promise((_, reject) => {
            cut = reject;
            stall();
          });
        })(),
        { maxBytes: LARGE },
      );
      // The backend has taken the first part and waits for more: the writer is mid-body.
      await writerStalls;
      let aborted = 0;
      for (let i = 0; i < 100 && aborted === 0; i++) {
        await sleep(50);
        aborted = await blobs.abortIncomplete(later);
      }
      assert.equal(aborted, 1, 'the unfinished put is found and removed');
      cut(new Error('writer gone'));
      await assert.rejects(stalled);
      assert.equal(await blobs.head('g/cut'), null);
      await blobs.close();
    });

    test('keys that break the rules are INVALID_INPUT, before any I/O', async () => {
      const blobs = await open();
      for (const key of [
        '',
        '/a',
        'a/',
        'a//b',
        '../x',
        'a/../b',
        '.tmp/x',
        'a/./b',
        'a b',
        'é',
        'x'.repeat(1025),
      ]) {
        assert.equal(
          await refusal(blobs.put(key, chunked(Buffer.from('x')), { maxBytes: 1 })),
          'INVALID_INPUT',
          key,
        );
        assert.equal(await refusal(blobs.get(key)), 'INVALID_INPUT', key);
        assert.equal(await refusal(blobs.head(key)), 'INVALID_INPUT', key);
        assert.equal(await refusal(blobs.delete(key)), 'INVALID_INPUT', key);
      }
      assert.equal(await refusal(blobs.list('../')), 'INVALID_INPUT');
      await blobs.close();
    });
  });
}
