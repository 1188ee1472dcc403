/**
 * The Slack client against the fake Slack (its real wire protocol): a send goes into the
 * thread it answers, in mrkdwn, with berth's key in its metadata; findSent reads the
 * thread back and finds it by that key; 429 (Retry-After) and refusals typed as the
 * runner acts on them. And the pure parts: the signature check and the event parsing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  PlatformError,
  parseSlackPush,
  SlackClient,
  slackSignature,
  toMrkdwn,
  verifySlackSignature,
} from '../src/channels/index.js';
import { FakeSlack } from './helpers/fake-slack.js';

const TOKEN = 'xoxb-test';
const SECRET = '8f742231b10e8888abcd99yyyzzz85a5';

test('slack client: threaded send with its key, found again by reading the thread back, typed failures', async (t) => {
  const fake = await new FakeSlack(TOKEN, SECRET).start();
  t.after(() => fake.close());
  const client = new SlackClient({ apiUrl: fake.url, token: TOKEN });
  const signal = new AbortController().signal;
  const message = { chatId: 'C1', text: '**hi** <b> & [x](https://e.org)', replyTo: '1.000001', key: '7.0' };

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
  assert.equal(fake.callsOf('chat.postMessage').length, 4, 'every call recorded');
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

test('mrkdwn: escapes and Markdown forms; code left as it is', () => {
  assert.equal(toMrkdwn('# Title\n__b__ ~~s~~ `a<b` & x'), '*Title*\n*b* ~s~ `a&lt;b` &amp; x');
  assert.equal(toMrkdwn('```\n**x**\n```'), '```\n**x**\n```');
});
