/**
 * The Slack client against the fake Slack (its real wire protocol): a send goes into the
 * thread it answers, in mrkdwn, with berth's key in its metadata; findSent reads the
 * thread back and finds it by that key; 429 (Retry-After) and refusals typed as the
 * runner acts on them; files both ways (a shared file's attachment fetched with the bot
 * token, an outbox file through Slack's upload flow into the thread). And the pure parts: the signature check and the event parsing.
 */
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { test } from 'node:test';
import {
  type ChannelEvent,
  PlatformError,
  parseSlackPush,
  parseSocketFrame,
  SlackClient,
  slackSignature,
  verifySlackSignature,
} from '../src/channels/index.js';
import { FakeSlack, type SocketEnvelope } from './helpers/fake-slack.js';
import { eventually } from './helpers/processes.js';

const TOKEN = 'xoxb-test';
const SECRET = '8f742231b10e8888abcd99yyyzzz85a5';

test('slack client: threaded send with its key, found again by reading the thread back, typed failures', async (t) => {
  const fake = await new FakeSlack(TOKEN, SECRET).start();
  t.after(() => fake.close());
  const client = new SlackClient({ apiUrl: fake.url, token: TOKEN });
  const signal = new AbortController().signal;
  // The reply's one part as the sender hands it over: mrkdwn beside its plain form.
  const [part] = client.parts('**hi** <b> & [x](https://e.org)');
  const message = { chatId: 'C1', ...part!, replyTo: '1.000001', key: '7.0' };

  assert.equal(await client.findSent(message, signal), null, 'nothing sent yet');
  const ts = await client.send(message, signal);
  assert.deepEqual(fake.posted[0], {
    channel: 'C1',
    ts,
    threadTs: '1.000001',
    text: '*hi* &lt;b&gt; &amp; <https://e.org|x>',
    metadata: { event_type: 'berth_channel_send', event_payload: { key: '7.0' } },
    at: fake.posted[0]!.at,
  });
  assert.equal(await client.findSent(message, signal), ts, 'found by its key in the thread');
  await client.send({ chatId: 'C1', text: 'no <markup>', replyTo: null, key: '8.0' }, signal);
  assert.equal(fake.posted[1]!.text, 'no &lt;markup&gt;', 'a part without markup is still escaped');
  assert.equal(await client.findSent({ ...message, key: '7.1' }, signal), null, 'another part: not sent');
  assert.equal(await client.findSent({ ...message, replyTo: null }, signal), null, 'unthreaded: cannot tell');

  fake.rateLimitNext('chat.postMessage', 1, 3);
  await assert.rejects(client.send(message, signal), (e: unknown) => {
    assert.ok(e instanceof PlatformError);
    assert.deepEqual(e.failure, { kind: 'rate-limited', retryAfterMs: 3000 });
    return true;
  });
  await assert.rejects(client.send({ ...message, chatId: 'nope' }, signal), (e: unknown) => {
    assert.ok(e instanceof PlatformError);
    assert.equal(e.failure.kind, 'refused');
    assert.match(e.message, /chat.postMessage: channel_not_found/);
    return true;
  });
  await assert.rejects(
    new SlackClient({ apiUrl: fake.url, token: 'xoxb-wrong' }).send(message, signal),
    (e: unknown) => e instanceof PlatformError && e.failure.kind === 'refused' && !e.message.includes('xoxb'),
  );
  assert.equal(fake.callsOf('chat.postMessage').length, 5, 'every call recorded');
});

test('slack files: a shared file parsed and fetched with the bot token only; a file back uploaded into the thread', async (t) => {
  const fake = await new FakeSlack(TOKEN, SECRET).start();
  t.after(() => fake.close());
  const client = new SlackClient({ apiUrl: fake.url, token: TOKEN });
  const signal = new AbortController().signal;
  const bytesOf = async (body: AsyncIterable<Uint8Array>) => {
    const chunks: Uint8Array[] = [];
    for await (const c of body) chunks.push(c);
    return Buffer.concat(chunks).toString();
  };

  const shared = fake.addFile('notes.txt', Buffer.from('hello file\n'));
  const push = parseSlackPush(
    { respondTo: 'all' },
    JSON.parse(fake.messageEvent({ channel: 'C1', user: 'U7', text: 'see', files: [shared] }).body),
  );
  assert.ok(push.kind === 'event' && push.inbound);
  const [attachment] = push.inbound.attachments ?? [];
  assert.deepEqual(attachment, {
    id: shared.id,
    name: 'notes.txt',
    sizeBytes: 11,
    url: shared.url_private_download,
  });
  assert.equal(await bytesOf(await client.download(attachment!, signal)), 'hello file\n');
  assert.deepEqual(fake.downloads, [{ id: shared.id, authorized: true }]);
  await assert.rejects(
    new SlackClient({ apiUrl: fake.url, token: 'xoxb-wrong' }).download(attachment!, signal),
    (e: unknown) =>
      e instanceof PlatformError &&
      e.failure.kind === 'refused' &&
      /Slack file: answered 403/.test(e.message),
  );
  // Never the token in clear to another host: refused before any request.
  await assert.rejects(
    client.download({ ...attachment!, url: 'http://files.example.org/x' }, signal),
    (e: unknown) => e instanceof PlatformError && e.failure.kind === 'refused',
  );
  assert.equal(fake.downloads.length, 2, 'the stray URL was not fetched');

  const message = { chatId: 'C1', text: 'r.txt', replyTo: '1.000001', key: '9.0' };
  const id = await client.sendFile(
    message,
    { name: 'r.txt', size: 6, body: Readable.from([Buffer.from('rep'), Buffer.from('ort')]) },
    signal,
  );
  assert.deepEqual(fake.uploaded, [
    { id, name: 'r.txt', bytes: Buffer.from('report'), channel: 'C1', threadTs: '1.000001' },
  ]);
  assert.deepEqual(
    fake.calls.filter((c) => c.method.startsWith('files.')).map((c) => [c.method, c.status]),
    [
      ['files.getUploadURLExternal', 200],
      ['files.completeUploadExternal', 200],
    ],
  );
  await assert.rejects(
    client.sendFile(
      { ...message, chatId: 'C1' },
      { name: 'e', size: 0, body: (async function* () {})() },
      signal,
    ),
    (e: unknown) =>
      e instanceof PlatformError && e.failure.kind === 'refused' && /invalid_arguments/.test(e.message),
    'an empty file: refused, as Slack does',
  );
});

test('slack signature: v0 HMAC of timestamp and body, within 5 minutes; anything else refused', () => {
  const now = 1_700_000_000_000;
  const ts = String(now / 1000);
  const body = '{"type":"event_callback"}';
  const good = slackSignature(SECRET, ts, body);
  assert.equal(verifySlackSignature(SECRET, ts, good, body, now), true);
  assert.equal(verifySlackSignature(SECRET, ts, good, `${body} `, now), false, 'another body');
  assert.equal(verifySlackSignature('other', ts, good, body, now), false, 'another secret');
  assert.equal(verifySlackSignature(SECRET, ts, good, body, now + 5 * 60_000 + 1000), false, 'stale');
  assert.equal(verifySlackSignature(SECRET, ts, undefined, body, now), false, 'unsigned');
  assert.equal(verifySlackSignature(SECRET, 'x', good, body, now), false, 'bad timestamp');
  assert.equal(verifySlackSignature(SECRET, ts, good.slice(0, -1), body, now), false, 'truncated');
});

test('slack events: challenge, messages by respondTo, bots and edits ignored, mention cut, thread kept', () => {
  const event = (e: Record<string, unknown>) => ({ type: 'event_callback', event_id: 'Ev1', event: e });
  const msg = { type: 'message', channel: 'C1', channel_type: 'channel', user: 'U7', text: 'hi', ts: '2.0' };
  assert.deepEqual(parseSlackPush({ respondTo: 'all' }, { type: 'url_verification', challenge: 'abc' }), {
    kind: 'challenge',
    challenge: 'abc',
  });
  assert.equal(parseSlackPush({ respondTo: 'all' }, { type: 'event_callback' }).kind, 'malformed');
  assert.deepEqual(parseSlackPush({ respondTo: 'all' }, event({ ...msg, thread_ts: '1.0' })), {
    kind: 'event',
    eventId: 'Ev1',
    inbound: {
      updateId: 0,
      chatId: 'C1',
      chatType: 'channel',
      userId: 'U7',
      username: null,
      messageId: '1.0',
      threadId: '1.0',
      text: 'hi',
    },
  });
  const inboundOf = (respondTo: 'all' | 'mention', e: Record<string, unknown>) => {
    const push = parseSlackPush({ respondTo }, event(e));
    return push.kind === 'event' ? push.inbound : undefined;
  };
  assert.equal(inboundOf('all', { ...msg, bot_id: 'B1' }), null, 'a bot (this one too)');
  assert.equal(inboundOf('all', { ...msg, subtype: 'message_changed' }), null, 'an edit');
  assert.equal(inboundOf('all', { ...msg, type: 'app_mention' }), null, 'all: the message event carries it');
  assert.equal(inboundOf('mention', msg), null, 'mention: a plain channel message');
  assert.equal(inboundOf('mention', { ...msg, channel_type: 'im' })?.text, 'hi', 'mention: a DM always');
  assert.equal(inboundOf('mention', { ...msg, type: 'app_mention', text: '<@UBOT> do it' })?.text, 'do it');
});

test('slack socket mode: hello, events committed then acknowledged, a redelivery after a failed commit, a malformed frame and a disconnect reconnect', async (t) => {
  const fake = await new FakeSlack(TOKEN, SECRET).start();
  t.after(() => fake.close());
  const client = new SlackClient({ apiUrl: fake.url, token: TOKEN, appToken: fake.appToken });
  assert.ok(client.listen, 'Socket Mode listens');
  assert.equal(new SlackClient({ apiUrl: fake.url, token: TOKEN }).listen, undefined, 'HTTP mode does not');
  // The store's part, as commitChannelEvent does it: each id once.
  const committed = new Map<string, string | null>();
  let hold: Promise<void> | null = null;
  let failNext = false;
  const commit = async (event: ChannelEvent) => {
    await hold;
    if (failNext) {
      failNext = false;
      throw new Error('store unreachable');
    }
    if (!committed.has(event.eventId)) committed.set(event.eventId, event.inbound?.text ?? null);
  };
  const abort = new AbortController();
  t.after(() => abort.abort());
  const listen = () => client.listen!(commit, abort.signal);
  let listening = listen();
  const ended = (p: Promise<void>) =>
    p.then(
      () => 'resolved',
      (e: unknown) => e,
    );
  const acked = (envelope: SocketEnvelope, n = 1) =>
    eventually(`${envelope.envelopeId} acknowledged`, async () => (envelope.acks >= n ? true : undefined));

  const a = fake.socketEvent(fake.messageEvent({ channel: 'C1', user: 'U7', text: 'one' }).body);
  await acked(a);
  assert.equal(committed.get(a.eventId), 'one');

  // The ack waits for the commit.
  let release = () => {};
  hold = new Promise<void>((r) => {
    release = r;
  });
  const b = fake.socketEvent(fake.messageEvent({ channel: 'C1', user: 'U7', text: 'two' }).body);
  await eventually('b delivered', async () => (b.deliveries === 1 ? true : undefined));
  await new Promise((r) => setTimeout(r, 200));
  assert.equal(b.acks, 0, 'not acknowledged while its commit is open');
  hold = null;
  release();
  await acked(b);

  // A commit that fails: the connection ends unacknowledged; the next one gets it again, committed once.
  failNext = true;
  const c = fake.socketEvent(fake.messageEvent({ channel: 'C1', user: 'U7', text: 'three' }).body);
  const failed = await ended(listening);
  assert.ok(failed instanceof PlatformError && failed.failure.kind === 'transient');
  assert.equal(c.acks, 0);
  listening = listen();
  await acked(c);
  assert.equal(c.deliveries, 2, 'delivered again to the new connection');
  assert.equal(committed.get(c.eventId), 'three');

  // A malformed frame ends the connection; the next one opens.
  fake.socketFrame('{not json');
  const malformed = await ended(listening);
  assert.ok(malformed instanceof PlatformError && /malformed/.test(malformed.message));
  listening = listen();
  await eventually('reconnected', async () =>
    fake.socketConnections === 3 && fake.socketOpen ? true : undefined,
  );

  // Slack asks for a new connection: the client opens it by itself.
  fake.socketFrame(JSON.stringify({ type: 'disconnect', reason: 'refresh_requested' }));
  await eventually('refreshed', async () =>
    fake.socketConnections === 4 && fake.socketOpen ? true : undefined,
  );
  const d = fake.socketEvent(fake.messageEvent({ channel: 'C1', user: 'U7', text: 'four' }).body);
  await acked(d);
  assert.deepEqual([...committed.values()], ['one', 'two', 'three', 'four']);
  assert.equal(fake.callsOf('apps.connections.open').length, 4);

  abort.abort();
  assert.equal(await ended(listening), 'resolved', 'aborting ends it quietly');

  // The bot token cannot open Socket Mode: a refusal, not a retry.
  const wrong = new SlackClient({ apiUrl: fake.url, token: TOKEN, appToken: TOKEN });
  await assert.rejects(
    wrong.listen!(commit, new AbortController().signal),
    (e: unknown) =>
      e instanceof PlatformError && e.failure.kind === 'refused' && /not_allowed_token_type/.test(e.message),
  );
});

test('slack socket frames: hello, disconnect, envelopes; anything else malformed', () => {
  assert.deepEqual(parseSocketFrame('{"type":"hello"}'), { type: 'hello' });
  assert.deepEqual(parseSocketFrame('{"type":"disconnect","reason":"warning"}'), {
    type: 'disconnect',
    reason: 'warning',
  });
  assert.deepEqual(parseSocketFrame('{"type":"events_api","envelope_id":"e1","payload":{"a":1}}'), {
    type: 'envelope',
    envelopeId: 'e1',
    events: true,
    payload: { a: 1 },
  });
  assert.equal(parseSocketFrame('{"type":"slash_commands","envelope_id":"e2"}')?.type, 'envelope');
  for (const bad of [
    'nope',
    '[]',
    '{"envelope_id":"e"}',
    '{"type":"events_api"}',
    '{"type":"events_api","envelope_id":""}',
  ])
    assert.equal(parseSocketFrame(bad), null, bad);
  assert.equal(parseSocketFrame(Buffer.from('{}')), null, 'binary');
});
