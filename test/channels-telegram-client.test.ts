/**
 * The Telegram client against the fake Bot API (its real wire protocol): updates read from
 * a cursor and forgotten only when a later cursor is asked for, sends in reply to a
 * message, and each kind of failure typed as the runner acts on it.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  PlatformError,
  TelegramClient,
  telegramWebhookUrl,
  verifyTelegramSecretToken,
} from '../src/channels/index.js';
import { FakeTelegram } from './helpers/fake-telegram.js';
import { eventually } from './helpers/processes.js';

const TOKEN = '1:abc';

test('telegram client: receive from a cursor, acknowledge by asking past it, send in reply, typed failures', async (t) => {
  const fake = await new FakeTelegram(TOKEN).start();
  t.after(() => fake.close());
  const client = new TelegramClient({ apiUrl: fake.url, token: TOKEN });
  const signal = new AbortController().signal;

  assert.deepEqual(await client.receive(0, 1000, signal), [], 'a long poll with nothing: empty');
  const a = fake.userMessage({ chatId: 5, userId: 7, username: 'alice', text: 'one' });
  fake.userMessage({ chatId: 5, userId: 7, text: 'two' });
  const first = await client.receive(0, 1000, signal);
  assert.deepEqual(first[0], {
    updateId: a.updateId,
    chatId: '5',
    chatType: 'private',
    userId: '7',
    username: 'alice',
    messageId: String(a.messageId),
    threadId: null,
    text: 'one',
  });
  assert.equal(first[1]!.username, null);
  assert.equal((await client.receive(0, 1000, signal)).length, 2, 'read again: nothing acknowledged yet');
  assert.equal(
    (await client.receive(a.updateId + 1, 1000, signal)).length,
    1,
    'asking past one acknowledges it',
  );
  assert.equal(fake.pendingUpdates, 1);

  const id = await client.send({ chatId: '5', text: 'hi', replyTo: String(a.messageId), key: '1.0' }, signal);
  assert.deepEqual(fake.sent.at(-1), {
    ...fake.sent.at(-1)!,
    chatId: '5',
    text: 'hi',
    replyTo: a.messageId,
    messageId: Number(id),
  });
  // Markup: sent in MarkdownV2, seen as formatted; markup Telegram refuses goes again as plain text.
  const [part] = client.parts('**Done.** See `a_b`.');
  assert.deepEqual(part, { text: 'Done. See a_b.', formatted: '*Done\\.* See `a_b`\\.' });
  await client.send({ chatId: '5', replyTo: null, key: '2.0', ...part! }, signal);
  assert.deepEqual([fake.sent.at(-1)!.parseMode, fake.sent.at(-1)!.text], ['MarkdownV2', 'Done. See a_b.']);
  fake.refuseEntitiesNext(1);
  const fallbackId = await client.send({ chatId: '5', replyTo: null, key: '3.0', ...part! }, signal);
  assert.deepEqual(
    fake
      .callsOf('sendMessage')
      .slice(-2)
      .map((c) => [c.status, c.body.parse_mode ?? null]),
    [
      [400, 'MarkdownV2'],
      [200, null],
    ],
  );
  assert.deepEqual(
    [fake.sent.at(-1)!.parseMode, fake.sent.at(-1)!.text, String(fake.sent.at(-1)!.messageId)],
    [null, 'Done. See a_b.', fallbackId],
  );
  // Files: a document by its name, a photo in its largest size; fetched through getFile and
  // the file URL; one past the Bot API's 20 MB refused.
  fake.userMessage({
    chatId: 5,
    userId: 7,
    caption: 'see',
    document: { name: 'a.txt', bytes: Buffer.from('doc') },
  });
  fake.userMessage({ chatId: 5, userId: 7, photo: { bytes: Buffer.from('big photo') } });
  fake.userMessage({ chatId: 5, userId: 7, document: { bytes: Buffer.from('x'), reportedSize: 25_000_000 } });
  const withFiles = (await client.receive(0, 1000, signal)).slice(-3);
  assert.deepEqual(
    withFiles.map((u) => [u.text, u.attachments]),
    [
      ['see', [{ id: 'FILE1-documents', name: 'a.txt', sizeBytes: 3 }]],
      ['', [{ id: 'FILE3-photos', name: 'photo-U3.jpg', sizeBytes: 9 }]],
      ['', [{ id: 'FILE4-documents', name: 'document-U4', sizeBytes: 25_000_000 }]],
    ],
  );
  const read = async (i: number) => {
    const chunks: Buffer[] = [];
    for await (const c of await client.download(withFiles[i]!.attachments![0]!, signal))
      chunks.push(Buffer.from(c));
    return Buffer.concat(chunks).toString();
  };
  assert.deepEqual([await read(0), await read(1)], ['doc', 'big photo']);
  await assert.rejects(
    read(2),
    (e: unknown) => e instanceof PlatformError && e.failure.kind === 'refused' && /too big/.test(e.message),
  );
  // A file back to the chat: sendDocument, multipart, in reply.
  const docId = await client.sendFile(
    { chatId: '5', text: '', replyTo: String(a.messageId), key: '4.0' },
    {
      name: 'r.txt',
      size: 6,
      body: (async function* () {
        yield Buffer.from('rep');
        yield Buffer.from('ort');
      })(),
    },
    signal,
  );
  const doc = fake.sent.at(-1)!;
  assert.deepEqual(
    [doc.document?.name, doc.document?.bytes.toString(), doc.replyTo, String(doc.messageId)],
    ['r.txt', 'report', a.messageId, docId],
  );
  await client.showTyping('5', signal);
  assert.equal(fake.callsOf('sendChatAction').length, 1);

  fake.rateLimitNext('sendMessage', 1, 3);
  await assert.rejects(
    client.send({ chatId: '5', text: 'x', replyTo: null, key: '1.0' }, signal),
    (e: unknown) => {
      assert.ok(e instanceof PlatformError);
      assert.deepEqual(e.failure, { kind: 'rate-limited', retryAfterMs: 3000 });
      return true;
    },
  );
  await assert.rejects(
    client.send({ chatId: '5', text: 'x'.repeat(5000), replyTo: null, key: '1.0' }, signal),
    (e: unknown) => e instanceof PlatformError && e.failure.kind === 'refused' && e.failure.status === 400,
  );
  // Two bot instances polling at once: Telegram ends the earlier poll with 409, which passes (transient).
  fake.userMessage({ chatId: 5, userId: 7, text: 'drain' });
  const cursor = (await client.receive(0, 1000, signal)).at(-1)!.updateId + 1;
  const slow = new TelegramClient({ apiUrl: fake.url, token: TOKEN });
  const earlier = slow.receive(cursor, 3000, signal);
  await new Promise((r) => setTimeout(r, 200));
  const later = slow.receive(cursor, 3000, signal);
  await assert.rejects(
    earlier,
    (e: unknown) =>
      e instanceof PlatformError && e.failure.kind === 'transient' && /Conflict/.test(e.message),
  );
  assert.deepEqual(await later, []);
  const wrong = new TelegramClient({ apiUrl: fake.url, token: '1:wrong' });
  await assert.rejects(wrong.receive(0, 0, signal), (e: unknown) => {
    assert.ok(e instanceof PlatformError && e.failure.kind === 'refused' && e.failure.status === 401);
    assert.doesNotMatch(e.message, /wrong/, 'the token is never in a message');
    return true;
  });
  const gone = new TelegramClient({ apiUrl: 'http://127.0.0.1:1', token: TOKEN });
  await assert.rejects(
    gone.send({ chatId: '5', text: 'x', replyTo: null, key: '1.0' }, signal),
    (e: unknown) =>
      e instanceof PlatformError && e.failure.kind === 'transient' && !e.message.includes(TOKEN),
  );
});

test('telegram client: --respond mention answers a group only when the bot is named or replied to; private chats always', async (t) => {
  const fake = await new FakeTelegram(TOKEN, 'BerthBot').start();
  t.after(() => fake.close());
  const client = new TelegramClient({ apiUrl: fake.url, token: TOKEN, respondTo: 'mention' });
  const signal = new AbortController().signal;
  const group = { chatId: -300, userId: 7, username: 'alice', chatType: 'supergroup' };
  fake.userMessage({ ...group, text: 'talking among ourselves' });
  fake.userMessage({ ...group, text: '@BerthBot echo hi' });
  fake.userMessage({ ...group, text: 'echo replied', replyToBot: 4 });
  fake.userMessage({ ...group, text: '/status@berthbot' });
  fake.userMessage({ ...group, text: '@someone_else look' });
  fake.userMessage({ ...group, text: '/status@OtherBot' });
  fake.userMessage({ chatId: 7, userId: 7, username: 'alice', text: 'in private' });
  const texts = (await client.receive(0, 1000, signal)).map((u) => u.text);
  assert.deepEqual(texts, ['', 'echo hi', 'echo replied', '/status', '', '', 'in private']);
  assert.equal(fake.callsOf('getMe').length, 1, 'the bot asked once who it is');
  await client.receive(0, 1000, signal);
  assert.equal(fake.callsOf('getMe').length, 1, 'and remembered');

  const everyone = new TelegramClient({ apiUrl: fake.url, token: TOKEN });
  assert.equal((await everyone.receive(0, 1000, signal))[0]!.text, 'talking among ourselves', 'respond all');
  assert.equal(fake.callsOf('getMe').length, 1, 'respond all needs no getMe');
});

test('telegram client: webhook mode sets the webhook with its secret_token and is not polled; the token checked in constant time', async (t) => {
  const fake = await new FakeTelegram(TOKEN).start();
  t.after(() => fake.close());
  const url = telegramWebhookUrl('https://berth.example/', 'tg2');
  assert.equal(url, 'https://berth.example/v1/channels/tg2/telegram/updates');
  const client = new TelegramClient({
    apiUrl: fake.url,
    token: TOKEN,
    webhook: { url, secretToken: 's3cret' },
  });
  assert.ok(client.listen, 'webhook mode listens (the runner then does not poll)');
  assert.equal(
    new TelegramClient({ apiUrl: fake.url, token: TOKEN }).listen,
    undefined,
    'polling mode does not',
  );
  const abort = new AbortController();
  const held = client.listen!(async () => {}, abort.signal);
  await eventually('the webhook set', async () => fake.webhook ?? undefined);
  assert.deepEqual(fake.webhook, { url, secretToken: 's3cret' });
  assert.equal(fake.callsOf('setWebhook')[0]!.body.allowed_updates?.toString(), 'message');
  abort.abort();
  await held;
  const bad = new TelegramClient({
    apiUrl: fake.url,
    token: TOKEN,
    webhook: { url, secretToken: 'no spaces' },
  });
  await assert.rejects(
    bad.listen!(async () => {}, new AbortController().signal),
    (e: unknown) => e instanceof PlatformError && e.failure.kind === 'refused',
  );

  assert.equal(verifyTelegramSecretToken('s3cret', 's3cret'), true);
  assert.equal(verifyTelegramSecretToken('s3cret', 's3cre'), false);
  assert.equal(verifyTelegramSecretToken('s3cret', 's3cret '), false);
  assert.equal(verifyTelegramSecretToken('s3cret', ''), false);
  assert.equal(verifyTelegramSecretToken('s3cret', undefined), false);
});
