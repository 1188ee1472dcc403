/**
 * Mediated storage on s3 blobs across machines: two hosts, each with its own data dir
 * (its "disk"), share a PostgreSQL store and a bucket of a real radosgw. What an agent
 * stores through host A's gateway is read through host B's after host A has stopped and
 * its data dir is deleted: a resident agent's data survives its machine.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { openBlobStore } from '../src/blobs/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { startFakeAnthropic } from './helpers/fake-models.js';
import { freshDatabase } from './helpers/postgres.js';
import { freshBucket, testS3 } from './helpers/s3.js';
import { startTestHost } from './helpers/test-host.js';

const CONTENT = 'a note that outlives its machine';
const done = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

test('s3 blobs: an object stored through one machine is read through another after the first is gone', async (t) => {
  const fake = await startFakeAnthropic([
    { tool: { name: 'storage_put', input: { key: 'notes/kept.txt', content: CONTENT } } },
    { text: 'Stored.' },
    { tool: { name: 'storage_get', input: { key: 'notes/kept.txt' } } },
    { text: 'Read it back.' },
  ]);
  t.after(() => fake.close());
  const s3 = await testS3();
  const bucket = await freshBucket('berth/');
  const env = {
    ANTHROPIC_BASE_URL: fake.url,
    BERTH_SECRET_KEY: 'e2e-passphrase',
    BERTH_STORE: await freshDatabase(),
    BERTH_BLOBS: `s3://${bucket.bucket}/berth`,
    ...s3.env(),
  };
  const withKey = async (dataDir: string) =>
    new SecretStore({ path: join(dataDir, 'secrets.json'), key: 'e2e-passphrase' }).set('anthropic', 'sk-x');

  const a = await startTestHost(t, env);
  await withKey(a.dataDir);
  await a.client.request('POST', '/v1/agents', { name: 'keeper', provider: 'anthropic', model: 'model-x' });
  await a.client.request('POST', '/v1/agents/keeper/grants', { prefix: 'notes/', ops: ['read', 'write'] });
  const first = await a.sendAndCollect('m1', { agent: 'keeper', text: 'Store a note.' }, done);
  assert.equal(first.at(-1)!.data.text, 'Stored.', JSON.stringify(first));

  // Machine A goes, with its disk.
  await a.host.close();
  await rm(a.dataDir, { recursive: true, force: true });
  assert.equal(existsSync(a.dataDir), false);

  const b = await startTestHost(t, env);
  await withKey(b.dataDir);
  const second = await b.sendAndCollect('m2', { agent: 'keeper', text: 'Read the note.' }, done);
  assert.equal(second.at(-1)!.data.text, 'Read it back.', JSON.stringify(second));
  const toolResults = (fake.requests[3]!.body.messages as { content: unknown }[])
    .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
    .filter((block: { type: string }) => block.type === 'tool_result')
    .map((block: { content?: string }) => String(block.content));
  assert.deepEqual(toolResults, [CONTENT]);

  // In the bucket, under the prefix: exactly the blob the row names, holding the content.
  const row = (await b.host.store.getStorageObject('keeper', 'notes/kept.txt'))!;
  const blobs = await openBlobStore(bucket);
  t.after(() => blobs.close());
  assert.deepEqual(
    (await blobs.list('storage/')).objects.map((o) => o.key),
    [`storage/${row.blob}`],
  );
  assert.equal(row.sha256, createHash('sha256').update(CONTENT).digest('hex'));
});
