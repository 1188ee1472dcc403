/**
 * A chat message's files stored before its commit (src/channels/channel-inbox.ts), with
 * the real Telegram client against the fake Bot API, a real file blob store and a real
 * SQLite store: a file within the limit stored and named with a note; one over the
 * agent's quota whose size Telegram did not report cut off at the limit and left out with
 * a notice; one Telegram will not hand over left out; a re-read after a crash stores the
 * same keys once.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { FileBlobStore } from '../src/blobs/index.js';
import { stageChannelFiles, TelegramClient } from '../src/channels/index.js';
import { agentSpecSchema } from '../src/core/index.js';
import { openSqliteStore } from '../src/store/index.js';
import { FakeTelegram } from './helpers/fake-telegram.js';

const TOKEN = '1:abc';

test('channel files: stored and named within the limit, left out with a notice past it, stored once', async (t) => {
  const fake = await new FakeTelegram(TOKEN).start();
  const dir = await mkdtemp(join(tmpdir(), 'berth-inbox-'));
  const store = openSqliteStore({
    path: ':memory:',
    leaseMs: 10_000,
    retry: { retryBaseMs: 1_000, retryMaxMs: 30_000, maxTries: 5 },
  });
  t.after(async () => {
    await fake.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });
  await store.createAgent(agentSpecSchema.parse({ name: 'sh', provider: 'command', workspaceMb: 1 }), 0);
  const blobs = new FileBlobStore(dir);
  const client = new TelegramClient({ apiUrl: fake.url, token: TOKEN });
  const signal = new AbortController().signal;
  const channel = { id: 'tg1', agent: 'sh' };
  const read = async (key: string) => {
    const chunks: Buffer[] = [];
    for await (const c of (await blobs.get(key)).body) chunks.push(c as Buffer);
    return Buffer.concat(chunks).toString();
  };

  fake.userMessage({
    chatId: 5,
    userId: 7,
    caption: 'cat inbox/a.txt',
    document: { name: '../a.txt', bytes: Buffer.from('abc') },
  });
  fake.userMessage({
    chatId: 5,
    userId: 7,
    document: { name: 'big.bin', bytes: Buffer.alloc(2 ** 20 + 1), reportedSize: null },
  });
  const [small, big] = await client.receive(0, 1000, signal);

  const staged = await stageChannelFiles({ store, blobs }, channel, client, small!, signal);
  assert.deepEqual(staged.files, [
    { name: 'a.txt', key: `channel-files/tg1/5-${small!.messageId}-0`, size: 3 },
  ]);
  assert.equal(staged.text, 'cat inbox/a.txt\n# attached: inbox/a.txt (3 bytes)');
  assert.equal(staged.notice, undefined);
  assert.equal(await read(staged.files![0]!.key), 'abc');
  const again = await stageChannelFiles({ store, blobs }, channel, client, small!, signal);
  assert.deepEqual(again.files, staged.files, 'a re-read stores the same key');
  assert.equal((await blobs.list('channel-files/')).objects.length, 1);

  const cut = await stageChannelFiles({ store, blobs }, channel, client, big!, signal);
  assert.deepEqual(cut.files, []);
  assert.equal(cut.text, '# not attached: big.bin is over the 1.0 MiB limit for files');
  assert.match(cut.notice!, /^Sorry, not attached: big\.bin is over the 1\.0 MiB limit/);
  assert.equal((await blobs.list('channel-files/')).objects.length, 1, 'nothing of it stored');

  const gone = await stageChannelFiles(
    { store, blobs },
    channel,
    client,
    {
      ...small!,
      attachments: [{ id: 'no-such-file', name: 'x.txt', sizeBytes: 1 }],
    },
    signal,
  );
  assert.deepEqual(gone.files, []);
  assert.match(gone.notice!, /not attached: x\.txt \(Telegram getFile: Bad Request: invalid file_id\)/);
});
