/**
 * The Discord client against the fake Discord (a real Gateway WebSocket and its REST
 * routes): IDENTIFY with the intents, each MESSAGE_CREATE handed to commit once, a dropped
 * connection RESUMEd with what it missed replayed, a malformed frame failing the
 * connection (the next one resumes), a restart's fresh session reading the history back;
 * sends with an enforced nonce (a resend posts nothing), 429 typed for the runner, an
 * empty rate-limit bucket waited out; attachments fetched from the CDN and a file sent
 * multipart with its nonce. And
 * the pure parts: frame parsing, which messages reach the agent, nonces, snowflakes.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import {
  type ChannelEvent,
  DiscordClient,
  discordNonce,
  type PlatformError,
  parseGatewayFrame,
  snowflakeAt,
  toDiscordInbound,
} from '../src/channels/index.js';
import type { Channel } from '../src/core/index.js';
import { FAKE_BOT_ID, FakeDiscord } from './helpers/fake-discord.js';
import { eventually } from './helpers/processes.js';

const TOKEN = 'discord-bot-token';
const CLOCK = { now: () => Date.now() };

function channelRow(overrides: Partial<Channel> = {}): Channel {
  return {
    id: 'dc1',
    tenant: 'default',
    platform: 'discord',
    agent: 'a',
    mapping: 'per-chat',
    allowUsers: ['42'],
    allowChats: ['C1'],
    tokenSecret: 'dc',
    signingSecret: null,
    appTokenSecret: null,
    webhookUrl: null,
    respondTo: 'all',
    email: null,
    paused: false,
    cursor: 0,
    leaseOwner: null,
    leaseUntil: 0,
    lastError: null,
    createdAt: Date.now() - 60_000,
    ...overrides,
  };
}

/** The store's commit as far as the client can tell: each event id applied once. */
function committer() {
  const applied = new Map<string, ChannelEvent>();
  const offers: string[] = [];
  return {
    applied,
    offers,
    commit: async (event: ChannelEvent) => {
      offers.push(event.eventId);
      if (!applied.has(event.eventId)) applied.set(event.eventId, event);
    },
    texts: () => [...applied.values()].flatMap((e) => (e.inbound ? [e.inbound.text] : [])),
  };
}

test('discord gateway: identify, dispatches committed once, resume after a drop, a malformed frame reconnects, a restart reads history back', async (t) => {
  const fake = await new FakeDiscord(TOKEN, 300).start();
  t.after(() => fake.close());
  const sink = committer();
  const stop = new AbortController();
  const client = new DiscordClient(channelRow(), { apiUrl: fake.url, token: TOKEN, clock: CLOCK });
  // As the runner does: call listen again after it fails.
  const failures: PlatformError[] = [];
  const running = (async () => {
    while (!stop.signal.aborted)
      await client.listen(sink.commit, stop.signal).catch((err: PlatformError) => failures.push(err));
  })();

  await eventually('READY', async () => (fake.connected ? true : undefined));
  const identify = fake.framesOf(2)[0]!.d as { token: string; intents: number };
  assert.equal(identify.token, TOKEN);
  assert.equal(identify.intents & (1 << 15), 1 << 15, 'MESSAGE_CONTENT');
  assert.equal(identify.intents & (1 << 9), 1 << 9, 'GUILD_MESSAGES');
  assert.equal(identify.intents & (1 << 12), 1 << 12, 'DIRECT_MESSAGES');

  fake.userMessage({ channelId: 'C1', userId: '42', content: 'one' });
  await eventually('one committed', async () => (sink.texts().includes('one') ? true : undefined));
  await eventually('a heartbeat acknowledged', async () =>
    fake.framesOf(1).some((f) => f.dir === 'in') && fake.framesOf(11).length > 0 ? true : undefined,
  );

  fake.dropConnection();
  fake.userMessage({ channelId: 'C1', userId: '42', content: 'two (while dropped)' });
  await eventually('resumed', async () =>
    fake.framesOf(6).length === 1 && fake.connected ? true : undefined,
  );
  const resume = fake.framesOf(6)[0]!.d as { session_id: string; seq: number };
  assert.equal(resume.session_id, 'sess1');
  await eventually('two committed', async () =>
    sink.texts().includes('two (while dropped)') ? true : undefined,
  );

  fake.sendMalformed();
  await eventually('a second resume', async () =>
    fake.framesOf(6).length === 2 && fake.connected ? true : undefined,
  );
  assert.match(failures.map((f) => f.message).join('\n'), /malformed frame/);
  fake.userMessage({ channelId: 'C1', userId: '42', content: 'three' });
  await eventually('three committed', async () => (sink.texts().includes('three') ? true : undefined));
  assert.equal(fake.framesOf(2).length, 1, 'one IDENTIFY: every reconnect resumed');

  // A restart: a new client has no session; what came meanwhile is only in the history.
  stop.abort();
  await running;
  fake.userMessage({ channelId: 'C1', userId: '42', content: 'four (while down)' });
  fake.userMessage({ channelId: 'C1', userId: '42', content: 'five (while down)' });
  fake.rateLimitNext('GET /channels/C1/messages', 1, 0.2);
  const stop2 = new AbortController();
  t.after(() => stop2.abort());
  const restarted = new DiscordClient(channelRow(), { apiUrl: fake.url, token: TOKEN, clock: CLOCK });
  void restarted.listen(sink.commit, stop2.signal).catch(() => {});
  await eventually('history read back', async () =>
    sink.texts().includes('five (while down)') ? true : undefined,
  );
  assert.equal(fake.framesOf(2).length, 2, 'a fresh IDENTIFY');
  assert.deepEqual(sink.texts(), [
    'one',
    'two (while dropped)',
    'three',
    'four (while down)',
    'five (while down)',
  ]);
  assert.equal(
    fake.callsOf('GET', '/channels/C1/messages').filter((c) => c.status === 429).length,
    1,
    'the read was rate limited once and repeated',
  );
  const counts = new Map<string, number>();
  for (const id of sink.offers) counts.set(id, (counts.get(id) ?? 0) + 1);
  assert.ok(
    [...counts.values()].some((n) => n > 1),
    'the read-back offers what was committed before again: the store keys it away',
  );
});

test('discord rest: a reply with an enforced nonce, a resend with the same key posts nothing, 429 typed', async (t) => {
  const fake = await new FakeDiscord(TOKEN).start();
  t.after(() => fake.close());
  const client = new DiscordClient(channelRow(), { apiUrl: fake.url, token: TOKEN, clock: CLOCK });
  const signal = new AbortController().signal;
  const message = { chatId: 'C1', text: '**done**', replyTo: '1234', key: '7.0' };

  const id = await client.send(message, signal);
  const again = await client.send(message, signal);
  assert.equal(again, id, 'the same nonce answers the first message');
  assert.equal(fake.botMessages('C1').length, 1, 'posted once');
  const body = fake.callsOf('POST', '/channels/C1/messages')[0]!.body!;
  assert.equal(body.nonce, discordNonce('dc1', '7.0'));
  assert.equal(body.enforce_nonce, true);
  assert.deepEqual(body.message_reference, { message_id: '1234', fail_if_not_exists: false });
  assert.equal(body.content, '**done**', 'Discord reads Markdown as it is');

  fake.rateLimitNext('POST /channels', 1, 1.5);
  await assert.rejects(
    client.send({ ...message, key: '8.0' }, signal),
    (err: PlatformError) => err.failure.kind === 'rate-limited' && err.failure.retryAfterMs === 1500,
  );
  await assert.rejects(
    new DiscordClient(channelRow(), { apiUrl: fake.url, token: 'wrong', clock: CLOCK }).send(message, signal),
    (err: PlatformError) => err.failure.kind === 'refused' && err.failure.status === 401,
  );
});

test('discord files: attachments fetched from the CDN without the token, a file sent multipart with the nonce (a resend posts nothing)', async (t) => {
  const fake = await new FakeDiscord(TOKEN).start();
  t.after(() => fake.close());
  const client = new DiscordClient(channelRow(), { apiUrl: fake.url, token: TOKEN, clock: CLOCK });
  const signal = new AbortController().signal;
  const row = fake.userMessage({
    channelId: 'C1',
    userId: '42',
    content: '',
    files: [
      { name: 'a.txt', bytes: Buffer.from('doc') },
      { name: 'gone.bin', bytes: Buffer.from('x') },
    ],
  });
  const inbound = toDiscordInbound(channelRow(), FAKE_BOT_ID, row)!;
  assert.deepEqual(
    inbound.attachments?.map((a) => [a.name, a.sizeBytes, (a.url ?? '').includes('/cdn/attachments/C1/')]),
    [
      ['a.txt', 3, true],
      ['gone.bin', 1, true],
    ],
  );
  const chunks: Uint8Array[] = [];
  for await (const c of await client.download(inbound.attachments![0]!, signal)) chunks.push(c);
  assert.equal(Buffer.concat(chunks).toString(), 'doc');
  assert.equal(client.maxFileBytes, 10 * 2 ** 20);
  await assert.rejects(
    client.download(
      { ...inbound.attachments![1]!, url: `${fake.url.replace(/\/api$/, '')}/cdn/nothing` },
      signal,
    ),
    (err: PlatformError) => err.failure.kind === 'refused' && err.failure.status === 404,
  );

  const message = { chatId: 'C1', text: '', replyTo: row.id, key: '9.1' };
  const file = () => ({
    name: 'r.txt',
    size: 6,
    body: Readable.from([Buffer.from('rep'), Buffer.from('ort')]),
  });
  const id = await client.sendFile(message, file(), signal);
  assert.equal(await client.sendFile(message, file(), signal), id, 'the same nonce answers the first');
  assert.equal(fake.botMessages('C1').length, 1, 'posted once');
  const [first] = fake.callsOf('POST', '/channels/C1/messages');
  assert.equal(first!.body!.nonce, discordNonce('dc1', '9.1'));
  assert.equal(first!.body!.enforce_nonce, true);
  assert.deepEqual(first!.body!.message_reference, { message_id: row.id, fail_if_not_exists: false });
  assert.deepEqual(
    (first!.body!.files as { name: string; bytes: Buffer }[]).map((f) => [f.name, f.bytes.toString()]),
    [['r.txt', 'report']],
  );
  const posted = fake.botMessages('C1')[0]!;
  assert.equal(posted.id, id);
  assert.deepEqual(
    posted.attachments?.map((a) => [a.filename, a.size]),
    [['r.txt', 6]],
  );
  assert.deepEqual(
    fake.callsOf('GET', '/cdn/').map((c) => c.status),
    [200, 404],
    'the CDN is read without the token',
  );
});

test('discord rest: an empty bucket (X-RateLimit-Remaining: 0) is waited out before the next call on its route', async (t) => {
  const fake = await new FakeDiscord(TOKEN).start();
  t.after(() => fake.close());
  let now = Date.now();
  const client = new DiscordClient(channelRow(), {
    apiUrl: fake.url,
    token: TOKEN,
    clock: { now: () => now },
  });
  const message = { chatId: 'C1', text: 'a', replyTo: null, key: '1.0' };
  fake.exhaustBucketNext('POST /channels/C1/messages', 60);
  await client.send(message, new AbortController().signal);
  const held = new AbortController();
  const waiting = client.send({ ...message, key: '2.0' }, held.signal);
  await client.showTyping('C1', new AbortController().signal);
  assert.equal(
    fake.callsOf('POST', '/channels/C1/messages').length,
    1,
    'the second send waits for the reset',
  );
  held.abort();
  await assert.rejects(waiting);
  now += 61_000;
  await client.send({ ...message, key: '3.0' }, new AbortController().signal);
  assert.equal(fake.callsOf('POST', '/channels/C1/messages').length, 2, 'after the reset it goes');
});

test('discord frames: parsing, who reaches the agent, nonces, snowflakes', () => {
  assert.equal(parseGatewayFrame('{"op": 0, "d": {'), null, 'not JSON');
  assert.equal(parseGatewayFrame('{"d": 1}'), null, 'no op');
  assert.equal(parseGatewayFrame('[1]'), null, 'not an object');
  assert.equal(parseGatewayFrame(new Uint8Array([1])), null, 'binary');
  assert.deepEqual(parseGatewayFrame('{"op":0,"d":{"id":"1"},"s":5,"t":"MESSAGE_CREATE"}'), {
    op: 0,
    d: { id: '1' },
    s: 5,
    t: 'MESSAGE_CREATE',
  });
  assert.deepEqual(parseGatewayFrame('{"op":11}'), { op: 11, d: null, s: null, t: null });

  const base = { id: '10', channel_id: 'C1', type: 0, content: 'hi', author: { id: '42', username: 'al' } };
  const all = { respondTo: 'all' as const };
  const mention = { respondTo: 'mention' as const };
  assert.deepEqual(toDiscordInbound(all, FAKE_BOT_ID, base), {
    updateId: 0,
    chatId: 'C1',
    chatType: 'dm',
    userId: '42',
    username: 'al',
    messageId: '10',
    threadId: null,
    text: 'hi',
  });
  assert.equal(toDiscordInbound(all, FAKE_BOT_ID, { ...base, author: { id: FAKE_BOT_ID } }), null, 'its own');
  assert.equal(
    toDiscordInbound(all, FAKE_BOT_ID, { ...base, author: { id: '7', bot: true } }),
    null,
    'a bot',
  );
  assert.equal(toDiscordInbound(all, FAKE_BOT_ID, { ...base, type: 7 }), null, 'a join');
  assert.equal(toDiscordInbound(all, FAKE_BOT_ID, { id: 5 }), null, 'malformed');
  const guild = { ...base, guild_id: 'G1' };
  assert.equal(toDiscordInbound(mention, FAKE_BOT_ID, guild), null, 'a guild message without the mention');
  assert.equal(toDiscordInbound(mention, FAKE_BOT_ID, base)?.text, 'hi', 'a DM needs none');
  const named = {
    ...guild,
    content: `<@${FAKE_BOT_ID}> status?`,
    mentions: [{ id: FAKE_BOT_ID }],
  };
  assert.equal(toDiscordInbound(mention, FAKE_BOT_ID, named)?.text, 'status?', 'the mention is cut');
  assert.equal(toDiscordInbound(mention, FAKE_BOT_ID, named)?.chatType, 'guild');

  assert.equal(discordNonce('dc1', '7.0'), 'dc1:7.0');
  const long = discordNonce('a-very-long-channel-name', '123456.3');
  assert.equal(long.length, 25);
  assert.equal(long, discordNonce('a-very-long-channel-name', '123456.3'), 'stable');
  assert.notEqual(long, discordNonce('a-very-long-channel-name', '123456.4'));

  assert.equal(snowflakeAt(1_420_070_400_000 + 1), String(1n << 22n));
  assert.equal(snowflakeAt(0), '0');
});
