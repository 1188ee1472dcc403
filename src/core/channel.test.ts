import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  CHANNEL_REFUSAL_INTERVAL_MS,
  type ChannelInbound,
  channelSessionId,
  decideChannelInbound,
  type InboundDecision,
  splitChannelText,
} from './channel.js';

const BASE = 1_700_000_000_000;
const CHANNEL = {
  id: 'tg1',
  platform: 'telegram' as const,
  mapping: 'per-chat' as const,
  allowUsers: ['@Alice', '42'],
  allowChats: ['-300'],
  paused: false,
};
const INBOUND: ChannelInbound = {
  updateId: 1,
  chatId: '100',
  chatType: 'private',
  userId: '7',
  username: 'alice',
  messageId: '5',
  threadId: null,
  text: 'hi',
};

test('decideChannelInbound: who reaches the agent, who is refused, and how often', () => {
  const cases: {
    name: string;
    inbound: Partial<ChannelInbound>;
    lastRefusalAt: number | null;
    want: InboundDecision;
  }[] = [
    {
      name: '@username, any case',
      inbound: {},
      lastRefusalAt: null,
      want: { action: 'enqueue', sessionId: 'tg-tg1-100' },
    },
    {
      name: 'numeric id',
      inbound: { username: null, userId: '42' },
      lastRefusalAt: null,
      want: { action: 'enqueue', sessionId: 'tg-tg1-100' },
    },
    {
      name: 'an allowed chat lets anyone in',
      inbound: { chatId: '-300', username: 'x', userId: '9' },
      lastRefusalAt: null,
      want: { action: 'enqueue', sessionId: 'tg-tg1--300' },
    },
    {
      name: 'a stranger, first time',
      inbound: { username: 'mallory', userId: '666' },
      lastRefusalAt: null,
      want: { action: 'refuse', reason: 'not-allowed' },
    },
    {
      name: 'a stranger, refused a minute ago',
      inbound: { username: 'mallory', userId: '666' },
      lastRefusalAt: BASE - 60_000,
      want: { action: 'ignore', reason: 'not-allowed-refused-lately' },
    },
    {
      name: 'a stranger, refused long ago',
      inbound: { username: 'mallory', userId: '666' },
      lastRefusalAt: BASE - CHANNEL_REFUSAL_INTERVAL_MS,
      want: { action: 'refuse', reason: 'not-allowed' },
    },
    {
      name: 'no username is not @alice',
      inbound: { username: null, userId: '666' },
      lastRefusalAt: null,
      want: { action: 'refuse', reason: 'not-allowed' },
    },
    {
      name: 'no text (a sticker, a join): nothing, not even a refusal',
      inbound: { text: '  ', username: 'mallory' },
      lastRefusalAt: null,
      want: { action: 'ignore', reason: 'empty' },
    },
    {
      name: '/status from an allowed user: a command for the chat session, not enqueued',
      inbound: { text: '/status' },
      lastRefusalAt: null,
      want: { action: 'command', command: 'status', sessionId: 'tg-tg1-100' },
    },
    {
      name: '/interrupt@botname in a group',
      inbound: { chatId: '-300', text: ' /interrupt@berth_bot ' },
      lastRefusalAt: null,
      want: { action: 'command', command: 'interrupt', sessionId: 'tg-tg1--300' },
    },
    {
      name: '/status from a stranger: refused like any message',
      inbound: { text: '/status', username: 'mallory', userId: '666' },
      lastRefusalAt: null,
      want: { action: 'refuse', reason: 'not-allowed' },
    },
    {
      name: 'a command among other words goes to the agent',
      inbound: { text: '/status please' },
      lastRefusalAt: null,
      want: { action: 'enqueue', sessionId: 'tg-tg1-100' },
    },
  ];
  for (const c of cases)
    assert.deepEqual(
      decideChannelInbound(CHANNEL, { ...INBOUND, ...c.inbound }, c.lastRefusalAt, BASE),
      c.want,
      c.name,
    );
});

test('channelSessionId: per chat, or per user in each chat; always a valid session id', () => {
  assert.equal(channelSessionId(CHANNEL, '-1001234567890', '7'), 'tg-tg1--1001234567890');
  assert.equal(
    channelSessionId({ ...CHANNEL, mapping: 'per-user' }, '-1001234567890', '7'),
    'tg-tg1--1001234567890-u7',
  );
  assert.match(
    channelSessionId(
      { id: 'abcdefghijklmnopqrstuvwx', platform: 'telegram', mapping: 'per-user' },
      '-1001234567890',
      '12345678901',
    ),
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
  );
});

test('channelSessionId: per thread on Slack (a valid id at the longest names); per chat where there is no thread', () => {
  const slack = { id: 'sl1', platform: 'slack', mapping: 'per-thread' } as const;
  assert.equal(
    channelSessionId(slack, 'C0123ABCD', 'U1', '1700000000.000100'),
    'sl-sl1-C0123ABCD-t1700000000_000100',
  );
  assert.equal(channelSessionId(slack, 'C0123ABCD', 'U1', null), 'sl-sl1-C0123ABCD');
  assert.match(
    channelSessionId({ ...slack, id: 'abcdefghijklmnopqrstuvwx' }, 'C0123ABCDEFG', 'U1', '1700000000.000100'),
    /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/,
  );
});

test('splitChannelText: parts of at most the limit, at a newline or space when one is near, never through a surrogate pair', () => {
  assert.deepEqual(splitChannelText('', 10), ['']);
  assert.deepEqual(splitChannelText('abc', 10), ['abc']);
  assert.deepEqual(splitChannelText('a'.repeat(25), 10), ['a'.repeat(10), 'a'.repeat(10), 'a'.repeat(5)]);
  assert.deepEqual(splitChannelText('hello world again', 10), ['hello ', 'world ', 'again']);
  const emoji = `${'a'.repeat(9)}😀b`;
  assert.deepEqual(splitChannelText(emoji, 10), ['a'.repeat(9), '😀b']);
  const text = 'x'.repeat(5000);
  assert.deepEqual(
    splitChannelText(text, 4096).map((p) => p.length),
    [4096, 904],
  );
  assert.equal(splitChannelText(text, 4096).join(''), text);
});
