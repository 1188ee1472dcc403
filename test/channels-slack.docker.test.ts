/**
 * A Slack channel end to end: a real `berth up` (child process, real sandboxes, a `command`
 * agent) taking signed Events API requests from a local fake Slack (helpers/fake-slack.ts)
 * and answering through its Web API. A user's message gets one reply in its thread; a
 * forged or stale signature is refused (401) and enqueues nothing; a retried event_id is
 * acknowledged and enqueued once; a stranger is refused once; a 429 is waited out. Then
 * berth is SIGKILLed between a reply's send and its record: after the restart the runner
 * reads the thread back, finds the reply by its key, and records it without posting again.
 * Last, a Socket Mode channel of the same app: an event over the WebSocket answered and
 * acknowledged, a malformed frame reconnected, and berth SIGKILLed between an event's
 * commit and its ack: the fake delivers it again after the restart, enqueued once. Files:
 * one shared over the Events API and one over Socket Mode are in inbox/ when their turns
 * run (fetched with the bot token), and a file the turn writes to outbox/ is uploaded into
 * the thread with Slack's upload flow.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { channelInstall, inboundTexts } from './helpers/channel-install.js';
import { FakeSlack } from './helpers/fake-slack.js';
import { berth, eventually, exited } from './helpers/processes.js';

const TOKEN = 'xoxb-1-test';
const SIGNING = 'slack-signing-secret-test';

test('slack: signed events enqueued once by event_id, replies in their thread, 401 for forgeries, 429 waited out, a SIGKILL between send and record reconciled without a second post; Socket Mode acknowledged after the commit, a SIGKILL before the ack redelivered and enqueued once; files in (both paths) and back (upload flow)', {
  timeout: 180_000,
}, async (t) => {
  const slack = await new FakeSlack(TOKEN, SIGNING).start();
  const {
    env,
    up,
    cli,
    store: storeOf,
  } = await channelInstall(t, {
    env: { BERTH_SLACK_API_URL: slack.url },
    secrets: { 'slack-bot': TOKEN, 'slack-sign': SIGNING, 'slack-app': slack.appToken },
    closePlatform: () => slack.close(),
  });
  const first = await up();
  const store = storeOf();
  await cli('agent', 'create', 'sh', '--provider', 'command');
  const missing = await berth(
    ['channel', 'add', 'slack', '--name', 'sl1', '--agent', 'sh', '--token-secret', 'slack-bot'],
    env,
  );
  assert.notEqual(missing.code, 0);
  assert.match(missing.stderr, /--signing-secret/, 'the fix is named');
  assert.match(
    await cli(
      'channel',
      'add',
      'slack',
      '--name',
      'sl1',
      '--agent',
      'sh',
      '--token-secret',
      'slack-bot',
      '--signing-secret',
      'slack-sign',
      '--map',
      'per-thread',
      '--allow',
      'U07ALICE',
    ),
    /sl1\tslack\tagent sh\tper-thread.*signing-secret slack-sign\trespond all/,
  );
  const endpoint = `${env.BERTH_URL}/v1/channels/sl1/slack/events`;
  const inbound = () => inboundTexts(store, 'sl');
  const repliesIn = (thread: string, count = 1) =>
    eventually(
      `${count} replies in thread ${thread}`,
      async () => {
        const all = slack.posted.filter((p) => p.threadTs === thread);
        return all.length >= count ? all : undefined;
      },
      60_000,
    );

  // The Request URL check.
  const challenge = await slack.deliver(
    endpoint,
    JSON.stringify({ type: 'url_verification', challenge: 'c-123' }),
  );
  assert.deepEqual([challenge.status, JSON.parse(challenge.body)], [200, { challenge: 'c-123' }]);

  // A message: one reply, in its thread, carrying berth's key.
  const hello = slack.messageEvent({ channel: 'C1', user: 'U07ALICE', text: 'echo hello' });
  assert.equal((await slack.deliver(endpoint, hello.body)).status, 200);
  const [reply] = await repliesIn(hello.ts);
  assert.deepEqual(
    [reply!.channel, reply!.text, reply!.metadata?.event_type],
    ['C1', 'hello\n', 'berth_channel_send'],
  );

  // Slack retries the same event (its ack "timed out"): acknowledged, enqueued once.
  assert.equal((await slack.deliver(endpoint, hello.body, { retryNum: 1 })).status, 200);

  // Forged (another secret) and stale (6 minutes old) signatures: 401, nothing enqueued.
  const forged = slack.messageEvent({ channel: 'C1', user: 'U07ALICE', text: 'echo forged' });
  const refused = await slack.deliver(endpoint, forged.body, { secret: 'not-the-secret' });
  assert.equal(refused.status, 401);
  assert.equal(JSON.parse(refused.body).error.code, 'CHANNEL_SIGNATURE_INVALID');
  const stale = await slack.deliver(endpoint, forged.body, {
    timestamp: Math.floor(Date.now() / 1000) - 360,
  });
  assert.equal(stale.status, 401);

  // A stranger: one polite refusal in the thread, nothing reaches the agent.
  const stranger = slack.messageEvent({ channel: 'C2', user: 'U0666BAD', text: 'echo pwned' });
  assert.equal((await slack.deliver(endpoint, stranger.body)).status, 200);
  assert.match((await repliesIn(stranger.ts))[0]!.text, /not passed on/);

  // A 429 on the next post: Retry-After (1 s) obeyed, the reply still arrives once.
  slack.rateLimitNext('chat.postMessage', 1, 1);
  const second = slack.messageEvent({
    channel: 'C1',
    user: 'U07ALICE',
    text: 'echo second',
    threadTs: hello.ts,
  });
  assert.equal((await slack.deliver(endpoint, second.body)).status, 200);
  const inThread = await repliesIn(hello.ts, 2);
  assert.equal(inThread[1]!.text, 'second\n');
  const posts = slack.callsOf('chat.postMessage');
  const limited = posts.findIndex((c) => c.status === 429);
  assert.ok(limited >= 0);
  assert.ok(posts[limited + 1]!.at - posts[limited]!.at >= 950, 'the retry came Retry-After later');
  assert.deepEqual(
    await inbound(),
    ['echo hello', 'echo second'],
    'each event once; no forgery; no stranger',
  );

  // SIGKILL between a reply's send and its record: the restart finds it in the thread.
  first.kill('SIGTERM');
  await exited(first);
  const doomed = await up('channel-after-send');
  const third = slack.messageEvent({ channel: 'C1', user: 'U07ALICE', text: 'echo third' });
  assert.equal((await slack.deliver(endpoint, third.body)).status, 200);
  await exited(doomed);
  assert.equal(doomed.signalCode, 'SIGKILL', 'died between the send and its record');
  assert.equal(slack.posted.filter((p) => p.threadTs === third.ts).length, 1, 'posted before the kill');
  const repliesBefore = slack.callsOf('conversations.replies').length;
  const restarted = await up();
  const recorded = await eventually(
    'the reply recorded',
    async () =>
      (await store.listChannelOutbox('sl1')).find((o) => o.replyTo === third.ts && o.status === 'sent'),
    60_000,
  );
  const posted = slack.posted.filter((p) => p.threadTs === third.ts);
  assert.equal(posted.length, 1, 'not posted again');
  assert.deepEqual(recorded.platformMessageIds, [posted[0]!.ts], 'the first post recorded');
  assert.ok(slack.callsOf('conversations.replies').length > repliesBefore, 'the thread was read back');
  assert.equal(slack.posted.length, 4, 'hello, the refusal, second, third: nothing twice');

  // Socket Mode: a second channel of the same app whose events come over a WebSocket berth opens.
  await cli(
    'channel',
    'add',
    'slack',
    '--name',
    'sl2',
    '--agent',
    'sh',
    '--token-secret',
    'slack-bot',
    '--socket-mode',
    '--app-token-secret',
    'slack-app',
    '--allow',
    'U07ALICE',
  );
  const socketOpen = (connections: number) =>
    eventually(
      `Socket Mode connection ${connections}`,
      async () => (slack.socketOpen && slack.socketConnections >= connections ? true : undefined),
      30_000,
    );
  await socketOpen(1);
  const viaSocket = slack.messageEvent({ channel: 'C9', user: 'U07ALICE', text: 'echo socket' });
  const envelope = slack.socketEvent(viaSocket.body);
  assert.equal((await repliesIn(viaSocket.ts))[0]!.text, 'socket\n');
  assert.equal(envelope.acks, 1, 'acknowledged once committed');

  // A malformed frame: the connection is dropped and a new one opened.
  slack.socketFrame('{"type": nope');
  await socketOpen(2);

  // SIGKILL after the commit, before the ack: the next process gets the envelope again, enqueues nothing twice.
  restarted.kill('SIGTERM');
  await exited(restarted);
  const beforeAck = await up('channel-before-ack');
  const killed = slack.messageEvent({ channel: 'C9', user: 'U07ALICE', text: 'echo acked later' });
  const unacked = slack.socketEvent(killed.body);
  await exited(beforeAck);
  assert.equal(beforeAck.signalCode, 'SIGKILL', 'died between the commit and the ack');
  assert.equal(unacked.acks, 0);
  await up();
  assert.equal((await repliesIn(killed.ts))[0]!.text, 'acked later\n');
  await eventually('the redelivery acknowledged', async () => (unacked.acks === 1 ? true : undefined));
  assert.equal(unacked.deliveries, 2, 'delivered again after the restart');
  assert.deepEqual(
    await inbound(),
    ['echo acked later', 'echo hello', 'echo second', 'echo socket', 'echo third'],
    'the redelivered event enqueued once',
  );
  assert.equal(slack.posted.filter((p) => p.threadTs === killed.ts).length, 1, 'answered once');

  // Files: shared with a message (Events API and Socket Mode), in inbox/ when its turn runs.
  const sharing = (channel: string, text: string, name: string, bytes: string) => {
    const file = slack.addFile(name, Buffer.from(bytes));
    return { file, ...slack.messageEvent({ channel, user: 'U07ALICE', text, files: [file] }) };
  };
  const withFile = sharing('C1', 'cat inbox/notes.txt', 'notes.txt', 'hello from a file\n');
  assert.equal((await slack.deliver(endpoint, withFile.body)).status, 200);
  assert.equal((await repliesIn(withFile.ts))[0]!.text, 'hello from a file\n');
  // A file back: what the turn writes under outbox/ is uploaded into the thread after its reply.
  const out = sharing(
    'C9',
    'cat inbox/s.txt && mkdir -p outbox && printf report > outbox/r.txt',
    's.txt',
    'over the socket',
  );
  slack.socketEvent(out.body);
  assert.equal((await repliesIn(out.ts))[0]!.text, 'over the socket');
  const uploaded = await eventually(
    'the file uploaded',
    async () => slack.uploaded.find((u) => u.threadTs === out.ts),
    30_000,
  );
  assert.deepEqual([uploaded.channel, uploaded.name, uploaded.bytes.toString()], ['C9', 'r.txt', 'report']);
  const sentFile = await eventually('the upload recorded', async () =>
    (await store.listChannelOutbox('sl2')).find((o) => o.replyTo === out.ts && o.file && o.status === 'sent'),
  );
  assert.deepEqual(sentFile.platformMessageIds, [uploaded.id], 'the file id recorded');
  assert.deepEqual(
    slack.downloads.map((d) => [d.id, d.authorized]),
    [
      [withFile.file.id, true],
      [out.file.id, true],
    ],
    'each file fetched once, with the bot token',
  );
});
