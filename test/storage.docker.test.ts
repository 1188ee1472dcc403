/**
 * Mediated storage end to end: a real host and real sandboxes; the fake
 * Anthropic server drives the runner's storage_* tools through the gateway. What one
 * session of the agent stores, another session of it (another sandbox) reads; what the
 * grant does not allow is a tool error the model sees; the content lives in the host's
 * blob store (file blobs: under its data dir) and is nowhere inside the sandbox.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretStore } from '../src/secrets/index.js';
import { type FakeModelServer, startFakeAnthropic } from './helpers/fake-models.js';
import { startTestHost } from './helpers/test-host.js';

const CONTENT = 'the zebra note 7f3a9c';
const done = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

/** The tool results the fake provider received with request `index`. */
function toolResultsOf(fake: FakeModelServer, index: number): string[] {
  const messages = fake.requests[index]!.body.messages as { content: unknown }[];
  const blocks = messages.flatMap((m) => (Array.isArray(m.content) ? m.content : []));
  return (blocks as { type: string; content?: string }[])
    .filter((b) => b.type === 'tool_result')
    .map((b) => String(b.content));
}

test('anthropic: storage_put in one session, storage_get in another; a denied op is a tool error', async (t) => {
  const fake = await startFakeAnthropic([
    { tool: { name: 'storage_put', input: { key: 'notes/hello.txt', content: CONTENT } } },
    { tool: { name: 'storage_delete', input: { key: 'notes/hello.txt' } } },
    { tool: { name: 'storage_put', input: { key: 'other/x', content: 'no' } } },
    { text: 'Stored.' },
    { tool: { name: 'storage_get', input: { key: 'notes/hello.txt' } } },
    { tool: { name: 'storage_list', input: { prefix: 'notes/' } } },
    {
      tool: {
        name: 'bash',
        input: {
          // The loop's own conversation (.berth/model-call.json, its checkpoint before each model
          // call) holds what storage_get answered, by design: any other file holding it would be a leak.
          command: `grep -rlsF --exclude=model-call.json '${CONTENT.slice(0, 8)}''${CONTENT.slice(8)}' /run /workspace /tmp /opt /etc /home /root /usr/local /mnt /var 2>/dev/null; grep -c storage /proc/mounts; true`,
        },
      },
    },
    { text: 'Read it back.' },
  ]);
  t.after(() => fake.close());
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
    ANTHROPIC_BASE_URL: fake.url,
    BERTH_SECRET_KEY: 'e2e-passphrase',
  });
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: 'e2e-passphrase' }).set(
    'anthropic',
    'sk-x',
  );
  await client.request('POST', '/v1/agents', { name: 'keeper', provider: 'anthropic', model: 'model-x' });
  await client.request('POST', '/v1/agents/keeper/grants', {
    prefix: 'notes/',
    ops: ['read', 'list', 'write'],
  });

  const first = await sendAndCollect('k1', { agent: 'keeper', text: 'Store a note.' }, done);
  assert.equal(first.at(-1)!.data.text, 'Stored.', JSON.stringify(first));
  const [put, deleted, outside] = toolResultsOf(fake, 3);
  const sha256 = createHash('sha256').update(CONTENT).digest('hex');
  assert.equal(put, `stored notes/hello.txt (${CONTENT.length} bytes, sha256 ${sha256})`);
  assert.match(deleted!, /403.*STORAGE_DENIED.*no grant allows delete/);
  assert.match(outside!, /403.*STORAGE_DENIED.*outside the prefixes granted for write/);

  // Another session of the agent: another sandbox, the same storage.
  const second = await sendAndCollect('k2', { agent: 'keeper', text: 'Read the note.' }, done);
  assert.equal(second.at(-1)!.data.text, 'Read it back.', JSON.stringify(second));
  const [got, listed, search] = toolResultsOf(fake, 7);
  assert.equal(got, CONTENT);
  assert.match(listed!, new RegExp(`^notes/hello.txt\\t${CONTENT.length} bytes\\tsha256 ${sha256}`));
  assert.match(
    search!,
    /^exit code 0\nstdout:\n0\n/,
    `the content or a storage mount is in the sandbox: ${search}`,
  );

  // On the host: one blob under the data dir, named by the store row; every call audited.
  const row = (await host.store.getStorageObject('keeper', 'notes/hello.txt'))!;
  assert.deepEqual(await readdir(join(dataDir, 'blobs', 'storage')), [row.blob]);
  const stored = await readFile(join(dataDir, 'blobs', 'storage', row.blob));
  assert.equal(createHash('sha256').update(stored).digest('hex'), sha256);
  const audit = (await host.store.listAudit(0, 1000)).filter((e) => e.kind.startsWith('storage-'));
  assert.deepEqual(
    audit.map((e) => [e.sessionId, e.kind, e.data.op]),
    [
      ['k1', 'storage-allowed', 'put'],
      ['k1', 'storage-denied', 'delete'],
      ['k1', 'storage-denied', 'put'],
      ['k2', 'storage-allowed', 'get'],
      ['k2', 'storage-allowed', 'list'],
    ],
  );
});
