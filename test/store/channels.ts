/**
 * Channels in the store, for every engine: configuration scoped by tenant, the lease that
 * lets one process drive a channel, the inbound commit (cursor + message in one
 * transaction, applied at most once, fenced by the lease), refusals rate-limited per chat,
 * and the outbox written with its reply or failure event and recorded part by part.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  CHANNEL_EVENT_KEEP_MS,
  CHANNEL_REFUSAL_INTERVAL_MS,
  type ChannelInbound,
  DEFAULT_TENANT,
  isBerthError,
} from '../../src/core/index.js';
import type { NewChannel, Store } from '../../src/store/index.js';
import { BASE, claimAndStartTurn, LEASE_MS, type OpenStore, withAgent } from './conformance.js';

export const CHANNEL: NewChannel = {
  id: 'tg1',
  tenant: DEFAULT_TENANT,
  platform: 'telegram',
  agent: 'sh',
  mapping: 'per-chat',
  allowUsers: ['@alice', '42'],
  allowChats: [],
  tokenSecret: 'tg',
  signingSecret: null,
  appTokenSecret: null,
  webhookUrl: null,
  respondTo: 'all',
  email: null,
};

/** A platform update of chat 100 from alice (allowed). */
export function update(updateId: number, over: Partial<ChannelInbound> = {}): ChannelInbound {
  return {
    updateId,
    chatId: '100',
    chatType: 'private',
    userId: '7',
    username: 'alice',
    messageId: String(1000 + updateId),
    threadId: null,
    text: `hello ${updateId}`,
    ...over,
  };
}

async function withChannel(open: OpenStore): Promise<Store> {
  const store = await withAgent(open);
  await store.createChannel(CHANNEL, BASE);
  assert.equal(await store.takeChannelLease('tg1', 'p1', BASE, LEASE_MS), true);
  return store;
}

export function runChannelConformance(kind: string, open: OpenStore): void {
  describe(`Store conformance: channels: ${kind}`, () => {
    test('channels: created for an existing agent, listed per tenant, paused, removed', async () => {
      const store = await withAgent(open);
      await assert.rejects(store.createChannel({ ...CHANNEL, agent: 'ghost' }, BASE), (e: unknown) =>
        isBerthError(e, 'AGENT_NOT_FOUND'),
      );
      const created = await store.createChannel(CHANNEL, BASE);
      assert.deepEqual(
        { ...created, createdAt: 0 },
        {
          ...CHANNEL,
          paused: false,
          cursor: 0,
          leaseOwner: null,
          leaseUntil: 0,
          lastError: null,
          createdAt: 0,
        },
      );
      await assert.rejects(store.createChannel(CHANNEL, BASE), (e: unknown) =>
        isBerthError(e, 'CHANNEL_EXISTS'),
      );
      assert.deepEqual(
        (await store.listChannels()).map((c) => c.id),
        ['tg1'],
      );
      assert.deepEqual(await store.listChannels('other'), []);
      assert.equal(await store.getChannel('tg1', 'other'), null);
      await assert.rejects(store.pauseChannel('tg1', true, 'other'), (e: unknown) =>
        isBerthError(e, 'CHANNEL_NOT_FOUND'),
      );
      assert.equal((await store.pauseChannel('tg1', true)).paused, true);
      assert.equal(
        await store.takeChannelLease('tg1', 'p1', BASE, LEASE_MS),
        false,
        'a paused channel is not driven',
      );
      assert.equal((await store.pauseChannel('tg1', false)).paused, false);
      assert.equal(await store.deleteChannel('tg1', BASE, 'other'), false);
      assert.equal(await store.deleteChannel('tg1', BASE), true);
      assert.equal(await store.deleteChannel('tg1', BASE), false);
      assert.deepEqual(await store.listChannels(), []);
      await store.close();
    });

    test('channels: one process holds the lease until it expires', async () => {
      const store = await withChannel(open);
      assert.equal(await store.takeChannelLease('tg1', 'p2', BASE + 1, LEASE_MS), false);
      assert.equal(await store.takeChannelLease('tg1', 'p1', BASE + 2, LEASE_MS), true, 'renewed');
      assert.equal(await store.takeChannelLease('tg1', 'p2', BASE + 2 + LEASE_MS + 1, LEASE_MS), true);
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(1), BASE + 2 + LEASE_MS + 2),
        'stale',
        'the old holder commits nothing',
      );
      await store.releaseChannelLease('tg1', 'p2');
      assert.equal((await store.getChannel('tg1'))?.leaseOwner, null);
      await store.close();
    });

    test('channels: an update and its message commit together, once; the cursor moves past every update', async () => {
      const store = await withChannel(open);
      assert.equal(await store.commitChannelInbound('tg1', 'p1', update(5), BASE + 1), 'enqueue');
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(5), BASE + 2),
        'stale',
        'applied once',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(4), BASE + 2),
        'stale',
        'behind the cursor',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(6, { text: '' }), BASE + 3),
        'ignore',
        'no text',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(7, { username: null, userId: '42' }), BASE + 4),
        'enqueue',
      );
      assert.equal((await store.getChannel('tg1'))?.cursor, 8);
      const messages = await store.listMessages('tg-tg1-100', 0, 10);
      assert.deepEqual(
        messages.map((m) => m.text),
        ['hello 5', 'hello 7'],
      );
      assert.equal((await store.getSessionView('tg-tg1-100', BASE + 5))?.agent, 'sh');
      await store.close();
    });

    test('channels: a message keeps the files stored for it in its data, a file left out is told in the same commit, and files a turn wrote follow its reply', async () => {
      const store = await withChannel(open);
      const files = [{ name: 'a.txt', key: 'channel-files/tg1/100-1001-0', size: 3 }];
      const withFiles = update(1, {
        text: 'cat inbox/a.txt',
        files,
        notice: 'Sorry, not attached: big.bin.',
      });
      assert.equal(await store.commitChannelInbound('tg1', 'p1', withFiles, BASE + 1), 'enqueue');
      assert.equal(await store.commitChannelInbound('tg1', 'p1', update(2), BASE + 2), 'enqueue');
      const messages = await store.listMessages('tg-tg1-100', 0, 10);
      assert.deepEqual(
        messages.map((m) => m.data),
        [{ inbox: files }, null],
      );
      const uses = async () => (await store.channelFileUses()).map((u) => [u.key, u.holder, u.status]);
      assert.deepEqual(
        await uses(),
        [[files[0]!.key, 'message', 'pending']],
        'a queued message needs its file',
      );
      const claim = await store.claimRunnableSession('w1', BASE + 3);
      const fence = { sessionId: claim!.session.id, generation: claim!.session.generation, workerId: 'w1' };
      const started = await store.startTurn(fence, BASE + 3);
      assert.deepEqual(
        started.code === 'ok' ? started.value?.messages.map((m) => m.data) : started.code,
        [{ inbox: files }, null],
        'the turn reads them',
      );
      assert.deepEqual(await uses(), [[files[0]!.key, 'message', 'processing']]);
      // The files the turn wrote under outbox/ are owed to the chat after its reply, in its commit.
      const written = { name: 'r.txt', key: 'channel-files/out/s/t-0', size: 6 };
      const committed = await store.commitTurn(
        {
          ...fence,
          turnId: started.code === 'ok' ? started.value!.turn.id : '',
          outputs: [{ text: 'done' }],
          workspace: { baseVersion: 0, layer: null, outbox: [written] },
        },
        BASE + 4,
      );
      assert.equal(committed, 'ok');
      assert.deepEqual(
        (await store.listChannelOutbox('tg1')).map((o) => [o.kind, o.text, o.replyTo, o.file]),
        [
          ['refusal', 'Sorry, not attached: big.bin.', '1001', null],
          ['reply', 'done', '1002', null],
          ['reply', '', '1002', written],
        ],
      );
      // The message is done (its file is in the workspace now): only the unsent file is needed.
      assert.deepEqual(await uses(), [[written.key, 'outbox', 'pending']]);
      for (let at = BASE + 5; ; at++) {
        const send = await store.takeChannelSend('tg1', 'p1', at, 60_000);
        if (!send) break;
        await store.endChannelSendAttempt(send, null, 'blocked', at);
      }
      assert.deepEqual(await uses(), [], 'a dead send needs its file no more');
      await store.close();
    });

    test('channels: an email channel keeps its mail settings; a mail commits once by its Message-ID; a domain allowed', async () => {
      const store = await withAgent(open);
      const email = {
        address: 'bot@berth.test',
        user: 'bot@berth.test',
        imapHost: '127.0.0.1',
        imapPort: 143,
        imapSecurity: 'none' as const,
        mailbox: 'INBOX',
        smtpHost: '127.0.0.1',
        smtpPort: 25,
        smtpSecurity: 'none' as const,
      };
      await store.createChannel(
        { ...CHANNEL, id: 'em1', platform: 'email', allowUsers: ['alice@berth.test', '@example.com'], email },
        BASE,
      );
      assert.deepEqual((await store.getChannel('em1'))?.email, email);
      const mail = (id: string, from: string, at: number) =>
        store.commitChannelEvent(
          'em1',
          id,
          update(0, { chatId: from, userId: from, username: from.split('@')[1]!, messageId: id }),
          BASE + at,
        );
      assert.equal(await mail('<m1@x>', 'alice@berth.test', 1), 'enqueue');
      assert.equal(
        await mail('<m1@x>', 'alice@berth.test', 2),
        'duplicate',
        'read again after a crash before its flag: nothing written',
      );
      assert.equal(await mail('<m2@x>', 'carol@example.com', 3), 'enqueue', 'a domain allowed');
      assert.equal(await mail('<m3@x>', 'eve@evil.test', 4), 'refuse');
      assert.deepEqual(
        (await store.listMessages('em-em1-alice_berth_test', 0, 10)).map((m) => m.text),
        ['hello 0'],
      );
      assert.equal((await store.listMessages('em-em1-carol_example_com', 0, 10)).length, 1);
      assert.deepEqual(
        (await store.listChannelOutbox('em1')).map((o) => [o.kind, o.chatId, o.replyTo]),
        [['refusal', 'eve@evil.test', '<m3@x>']],
      );
      await store.close();
    });

    test('channels: a pushed event commits with its message once by its id; per-thread sessions; a paused channel takes none', async () => {
      const store = await withAgent(open);
      await store.createChannel(
        {
          ...CHANNEL,
          id: 'sl1',
          platform: 'slack',
          signingSecret: 'sign',
          mapping: 'per-thread',
          allowUsers: ['U7'],
        },
        BASE,
      );
      assert.deepEqual(
        [(await store.getChannel('sl1'))?.mapping, (await store.getChannel('sl1'))?.signingSecret],
        ['per-thread', 'sign'],
      );
      const push = (thread: string, over: Partial<ChannelInbound> = {}) =>
        update(0, {
          chatId: 'C1',
          userId: 'U7',
          username: null,
          messageId: thread,
          threadId: thread,
          ...over,
        });
      assert.equal(await store.channelEventApplied('sl1', 'Ev1'), false, 'not applied yet');
      assert.equal(await store.commitChannelEvent('sl1', 'Ev1', push('1.1'), BASE + 1), 'enqueue');
      assert.deepEqual(
        [await store.channelEventApplied('sl1', 'Ev1'), await store.channelEventApplied('other', 'Ev1')],
        [true, false],
        'applied, for its channel only',
      );
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev1', push('1.1'), BASE + 2),
        'duplicate',
        'a retried delivery writes nothing',
      );
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev2', push('1.1', { text: 'again' }), BASE + 3),
        'enqueue',
      );
      assert.equal(await store.commitChannelEvent('sl1', 'Ev3', push('2.2'), BASE + 4), 'enqueue');
      assert.equal(await store.commitChannelEvent('sl1', 'Ev4', null, BASE + 5), 'ignore', 'no message');
      assert.equal(await store.commitChannelEvent('sl1', 'Ev4', null, BASE + 5), 'duplicate');
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev5', push('3.3', { userId: 'U9' }), BASE + 6),
        'refuse',
        'a stranger',
      );
      assert.deepEqual(
        (await store.listMessages('sl-sl1-C1-t1_1', 0, 10)).map((m) => m.text),
        ['hello 0', 'again'],
      );
      assert.equal((await store.listMessages('sl-sl1-C1-t2_2', 0, 10)).length, 1);
      assert.deepEqual(
        (await store.listChannelOutbox('sl1')).map((o) => [o.kind, o.replyTo]),
        [['refusal', '3.3']],
      );
      await store.pauseChannel('sl1', true);
      assert.equal(await store.commitChannelEvent('sl1', 'Ev6', push('4.4'), BASE + 7), 'stale', 'paused');
      await store.pauseChannel('sl1', false);
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev6', push('4.4'), BASE + 8),
        'enqueue',
        'delivered again later',
      );
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev1', null, BASE + 1 + CHANNEL_EVENT_KEEP_MS - 1),
        'duplicate',
        'kept for as long as Slack may retry',
      );
      assert.equal(
        await store.commitChannelEvent('sl1', 'Ev1', null, BASE + 2 + CHANNEL_EVENT_KEEP_MS),
        'ignore',
        'forgotten after that',
      );
      await store.close();
    });

    test('channels: a message its session refuses (archived) moves the cursor and owes the chat the code', async () => {
      const store = await withChannel(open);
      await store.commitChannelInbound('tg1', 'p1', update(1), BASE);
      await store.archiveSession('tg-tg1-100', BASE + 1);
      assert.equal(await store.commitChannelInbound('tg1', 'p1', update(2), BASE + 2), 'refuse');
      assert.equal((await store.getChannel('tg1'))?.cursor, 3, 'the update does not block the ones after it');
      const notices = (await store.listChannelOutbox('tg1')).filter((o) => o.replyTo === '1002');
      assert.deepEqual(
        notices.map((o) => [o.kind, o.text]),
        [['failure', 'Sorry, that failed (SESSION_ARCHIVED).']],
      );
      await store.close();
    });

    test('channels: per-user mapping gives each user of a chat a session', async () => {
      const store = await withAgent(open);
      await store.createChannel({ ...CHANNEL, mapping: 'per-user', allowChats: ['-300'] }, BASE);
      await store.takeChannelLease('tg1', 'p1', BASE, LEASE_MS);
      await store.commitChannelInbound(
        'tg1',
        'p1',
        update(1, { chatId: '-300', userId: '8', username: null }),
        BASE,
      );
      await store.commitChannelInbound(
        'tg1',
        'p1',
        update(2, { chatId: '-300', userId: '9', username: null }),
        BASE,
      );
      assert.equal((await store.listMessages('tg-tg1--300-u8', 0, 10)).length, 1);
      assert.equal((await store.listMessages('tg-tg1--300-u9', 0, 10)).length, 1);
      await store.close();
    });

    test('channels: the chats whose sessions were active since a time, the most recent first', async () => {
      const store = await withAgent(open);
      await store.createChannel({ ...CHANNEL, allowChats: ['100', '200', '300'] }, BASE);
      await store.takeChannelLease('tg1', 'p1', BASE, LEASE_MS);
      for (const [i, chatId] of ['100', '200', '300'].entries())
        await store.commitChannelInbound('tg1', 'p1', update(i + 1, { chatId }), BASE + 10 * i);
      assert.deepEqual(await store.recentChannelChats('tg1', BASE + 5, 10), ['300', '200']);
      assert.deepEqual(await store.recentChannelChats('tg1', BASE + 5, 1), ['300'], 'at most the limit');
      assert.deepEqual(await store.recentChannelChats('tg1', BASE, 10), ['300', '200', '100']);
      assert.deepEqual(await store.recentChannelChats('other', BASE, 10), [], 'of that channel only');
      await store.close();
    });

    test('channels: a stranger gets one refusal per chat and interval, and no session', async () => {
      const store = await withChannel(open);
      const stranger = { username: 'mallory', userId: '666', chatId: '200' };
      assert.equal(await store.commitChannelInbound('tg1', 'p1', update(1, stranger), BASE), 'refuse');
      assert.equal(await store.commitChannelInbound('tg1', 'p1', update(2, stranger), BASE + 1000), 'ignore');
      await store.takeChannelLease('tg1', 'p1', BASE + CHANNEL_REFUSAL_INTERVAL_MS, LEASE_MS);
      assert.equal(
        await store.commitChannelInbound(
          'tg1',
          'p1',
          update(3, stranger),
          BASE + CHANNEL_REFUSAL_INTERVAL_MS + 1,
        ),
        'refuse',
      );
      assert.equal(await store.getSessionView('tg-tg1-200', BASE), null);
      const outbox = await store.listChannelOutbox('tg1');
      assert.deepEqual(
        outbox.map((o) => [o.kind, o.chatId, o.replyTo]),
        [
          ['refusal', '200', '1001'],
          ['refusal', '200', '1003'],
        ],
      );
      await store.close();
    });

    test('channels: a reply is owed to its chat in the commit, answering the last message; parts are recorded once', async () => {
      const store = await withChannel(open);
      await store.commitChannelInbound('tg1', 'p1', update(1), BASE);
      const { fence, turn } = await claimAndStartTurn(store, BASE + 1);
      assert.equal(
        await store.takeChannelSend('tg1', 'p1', BASE + 1, 60_000),
        null,
        'nothing owed before the commit',
      );
      await store.commitTurn({ ...fence, turnId: turn.id, outputs: [{ text: 'hi back' }] }, BASE + 2);
      const item = await store.takeChannelSend('tg1', 'p1', BASE + 3, 60_000);
      assert.ok(item);
      assert.deepEqual(
        [item.kind, item.chatId, item.text, item.replyTo, item.attempts],
        ['reply', '100', 'hi back', '1001', 1],
      );
      assert.equal(
        await store.takeChannelSend('tg1', 'p1', BASE + 4, 60_000),
        null,
        'taken: not due again yet',
      );
      assert.equal(await store.recordChannelPartSent(item, '555', false, BASE + 5), true);
      assert.equal(
        await store.recordChannelPartSent(item, '555', false, BASE + 5),
        false,
        'the same part twice: stale',
      );
      assert.equal(
        await store.recordChannelPartSent(
          { ...item, partsSent: 1, platformMessageIds: ['555'] },
          '556',
          true,
          BASE + 6,
        ),
        true,
      );
      const [sent] = await store.listChannelOutbox('tg1');
      assert.deepEqual(
        [sent?.status, sent?.platformMessageIds, sent?.partsSent],
        ['sent', ['555', '556'], 2],
      );
      await store.close();
    });

    test('channels: a send another process took is taken again at once; a rate limit waits; a refusal is dead', async () => {
      const store = await withChannel(open);
      await store.commitChannelInbound('tg1', 'p1', update(1, { username: 'x', userId: '1' }), BASE);
      await store.commitChannelInbound(
        'tg1',
        'p1',
        update(2, { username: 'x', userId: '1', chatId: '300' }),
        BASE,
      );
      const first = await store.takeChannelSend('tg1', 'p1', BASE, 60_000);
      assert.ok(first);
      const again = await store.takeChannelSend('tg1', 'p2', BASE + 1, 60_000);
      assert.equal(again?.id, first.id, 'the new holder takes it over');
      assert.equal(
        await store.recordChannelPartSent(first, '1', true, BASE + 2),
        false,
        "the old attempt's record is stale",
      );
      await store.endChannelSendAttempt(again, BASE + 5000, 'rate limited', BASE + 2);
      assert.equal(
        await store.takeChannelSend('tg1', 'p2', BASE + 3, 60_000),
        null,
        'the head waits; nothing passes it',
      );
      assert.equal(await store.nextChannelSendAt('tg1'), BASE + 5000);
      const retried = await store.takeChannelSend('tg1', 'p2', BASE + 5000, 60_000);
      assert.equal(retried?.id, first.id);
      await store.endChannelSendAttempt(retried!, null, 'blocked', BASE + 5001);
      const next = await store.takeChannelSend('tg1', 'p2', BASE + 5002, 60_000);
      assert.equal(next?.chatId, '300');
      assert.deepEqual(
        (await store.listChannelOutbox('tg1')).map((o) => o.status),
        ['dead', 'pending'],
      );
      await store.close();
    });

    test('channels: /status and /interrupt are answered in the commit, never enqueued; the interrupt asks the running turn to stop', async () => {
      const store = await withChannel(open);
      const answers = async () =>
        (await store.listChannelOutbox('tg1')).map((o) => [o.kind, o.text, o.replyTo, o.eventId]);
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(1, { text: '/status' }), BASE),
        'command',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(2, { text: '/interrupt' }), BASE),
        'command',
      );
      assert.equal(await store.getSessionView('tg-tg1-100', BASE), null, 'no session made by a command');
      await store.commitChannelInbound('tg1', 'p1', update(3, { text: 'sleep 60' }), BASE + 1);
      await store.commitChannelInbound('tg1', 'p1', update(4, { text: 'echo next' }), BASE + 1);
      const { turn } = await claimAndStartTurn(store, BASE + 2);
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(5, { text: '/status' }), BASE + 3),
        'command',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(6, { text: '/interrupt' }), BASE + 4),
        'command',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(7, { text: '/interrupt' }), BASE + 5),
        'command',
      );
      assert.equal(
        await store.commitChannelInbound('tg1', 'p1', update(6, { text: '/interrupt' }), BASE + 6),
        'stale',
        'a command applied once',
      );
      assert.deepEqual(await answers(), [
        ['reply', 'No session yet: your next message starts one.', '1001', null],
        ['reply', 'Nothing is running: there was nothing to interrupt.', '1002', null],
        ['reply', 'Session tg-tg1-100: running, 0 messages waiting.', '1005', null],
        [
          'reply',
          'Interrupted the running turn: its changes are discarded, and the session goes on with its next message.',
          '1006',
          null,
        ],
        ['reply', 'The running turn is already being interrupted.', '1007', null],
      ]);
      const interrupted = (await store.getSessionView('tg-tg1-100', BASE + 6))?.currentTurn;
      assert.equal(interrupted?.id, turn.id);
      assert.equal(interrupted?.interruptRequestedAt, BASE + 4, 'asked as POST /interrupt asks');
      assert.deepEqual(
        (await store.listMessages('tg-tg1-100', 0, 10)).map((m) => m.text),
        ['sleep 60', 'echo next'],
        'commands never reach the agent',
      );
      await store.close();
    });

    test('channels: a failed turn owes its chat one short message with the code', async () => {
      const store = await withChannel(open);
      await store.commitChannelInbound('tg1', 'p1', update(1), BASE);
      const { fence, turn } = await claimAndStartTurn(store, BASE + 1);
      // A terminal code: the message fails at once (a retryable one would be tried again first).
      await store.abortTurn(
        { ...fence, turnId: turn.id, code: 'OUTPUT_LIMIT_EXCEEDED', error: 'boom' },
        BASE + 2,
      );
      const outbox = await store.listChannelOutbox('tg1');
      assert.deepEqual(
        outbox.map((o) => [o.kind, o.text, o.replyTo]),
        [['failure', 'Sorry, that failed (OUTPUT_LIMIT_EXCEEDED).', '1001']],
      );
      await store.close();
    });
  });
}
