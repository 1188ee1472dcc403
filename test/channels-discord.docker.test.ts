/**
 * A Discord channel end to end: a real `berth up` (child process, real sandboxes, a
 * `command` agent) holding a Gateway connection to a local fake Discord
 * (helpers/fake-discord.ts) and answering over its REST routes. A message gets one reply
 * referencing it; a stranger is refused once; a dropped connection is resumed with nothing
 * lost or doubled; a malformed frame is logged and the connection re-established; a 429 is
 * waited out. berth SIGKILLed while messages arrive: the restart's fresh session reads the
 * history back and enqueues each missed message once. berth SIGKILLed between a reply's
 * send and its record: the resend carries the same nonce, and Discord posts nothing new.
 * Files: one sent with a message is in inbox/ for its turn; one written to outbox/ comes back.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { channelInstall, inboundTexts } from './helpers/channel-install.js';
import { FakeDiscord } from './helpers/fake-discord.js';
import { eventually, exited } from './helpers/processes.js';

const TOKEN = 'discord-bot-token-test';
const C1 = '1100000000000000001';
const C2 = '1100000000000000002';
const DM = '1100000000000000009';

test('discord: gateway messages enqueued once by id, replies referencing them, resume after a drop, a malformed frame survived, 429 waited out, history read back after a SIGKILL, a resend after a SIGKILL deduplicated by its nonce, files to and from the agent', {
  timeout: 180_000,
}, async (t) => {
  const discord = await new FakeDiscord(TOKEN, 2_000).start();
  const {
    up,
    cli,
    logs,
    store: storeOf,
  } = await channelInstall(t, {
    env: { BERTH_DISCORD_API_URL: discord.url },
    secrets: { 'discord-bot': TOKEN },
    closePlatform: () => discord.close(),
  });
  const first = await up();
  const store = storeOf();
  await cli('agent', 'create', 'sh', '--provider', 'command');
  assert.match(
    await cli(
      'channel',
      'add',
      'discord',
      '--name',
      'dc1',
      '--agent',
      'sh',
      '--token-secret',
      'discord-bot',
      '--allow',
      '42',
      '--allow-chats',
      C1,
    ),
    /dc1\tdiscord\tagent sh\tper-chat.*respond all/,
  );
  const inbound = () => inboundTexts(store, 'dc');
  const replyTo = (id: string) =>
    eventually(
      `a reply to ${id}`,
      async () => discord.botMessages().find((m) => m.message_reference?.message_id === id),
      30_000,
    );
  const say = (content: string, channelId = C1, userId = '42') =>
    discord.userMessage({ channelId, userId, content, guildId: 'G1' });

  const hello = say('echo hello');
  assert.equal((await replyTo(hello.id)).content, 'hello\n');
  const identify = discord.framesOf(2);
  assert.equal(identify.length, 1, 'one IDENTIFY');

  // Files: one sent with a message is in inbox/ when its turn runs (fetched from the CDN);
  // one the turn writes under outbox/ follows the reply as a multipart create, in reply too.
  const attached = discord.userMessage({
    channelId: C1,
    userId: '42',
    guildId: 'G1',
    content: 'cat inbox/note.txt',
    files: [{ name: 'note.txt', bytes: Buffer.from('bytes of a file\n') }],
  });
  assert.equal((await replyTo(attached.id)).content, 'bytes of a file\n');
  const out = say('mkdir -p outbox && printf report > outbox/r.txt && echo done');
  const back = await eventually(
    'the file back',
    async () =>
      discord.botMessages().find((m) => m.message_reference?.message_id === out.id && m.attachments),
    30_000,
  );
  assert.equal(back.attachments?.[0]?.filename, 'r.txt');
  const [upload] = discord.callsOf('POST', `/channels/${C1}/messages`).filter((c) => c.body?.files);
  assert.deepEqual(
    (upload!.body!.files as { name: string; bytes: Buffer }[]).map((f) => [f.name, f.bytes.toString()]),
    [['r.txt', 'report']],
  );
  assert.equal(typeof upload!.body!.nonce, 'string', 'the file carries its nonce');

  // A stranger in a chat nobody allowed: one refusal, nothing reaches the agent.
  const stranger = say('echo pwned', C2, '666');
  assert.match((await replyTo(stranger.id)).content, /not passed on/);
  say('echo pwned again', C2, '666');

  // The connection drops; a message meanwhile is replayed on RESUME and answered once.
  discord.dropConnection();
  const dropped = say('echo dropped');
  await replyTo(dropped.id);
  assert.ok(
    discord.framesOf(6).some((f) => f.dir === 'in'),
    'RESUME sent',
  );

  // A malformed frame: logged, the connection re-established (resumed), the channel lives.
  const resumesBefore = discord.framesOf(6).length;
  discord.sendMalformed();
  await eventually('resumed after the malformed frame', async () =>
    discord.framesOf(6).length > resumesBefore && discord.connected ? true : undefined,
  );
  // A 429 on the next reply: retry_after (1 s) obeyed, the reply still posted once.
  discord.rateLimitNext(`POST /channels/${C1}/messages`, 1, 1);
  const limited = say('echo limited');
  await replyTo(limited.id);
  assert.equal(discord.callsOf('POST', `/channels/${C1}/messages`).filter((c) => c.status === 429).length, 1);
  assert.match(await logs(), /malformed frame/);

  // A direct message from an allowed user: its chat is on no allowlist.
  const dm = discord.userMessage({ channelId: DM, userId: '42', content: 'echo dm' });
  await replyTo(dm.id);

  // SIGKILL while messages arrive: whatever was not committed is read back after the restart,
  // in the allowlisted chat and in the direct messages' chat, which was active recently.
  const racing = say('echo racing');
  first.kill('SIGKILL');
  await exited(first);
  const whileDown = say('echo while down');
  const dmWhileDown = discord.userMessage({ channelId: DM, userId: '42', content: 'echo dm while down' });
  const restarted = await up();
  await replyTo(racing.id);
  await replyTo(whileDown.id);
  await replyTo(dmWhileDown.id);
  assert.ok(discord.callsOf('GET', `/channels/${C1}/messages?after=`).length > 0, 'history read back');
  assert.equal(
    discord.callsOf('GET', '/cdn/attachments/').length,
    1,
    'the read-back fetched no file again: the message carrying it was applied',
  );

  // SIGKILL between a reply's send and its record: the resend's nonce answers the first post.
  restarted.kill('SIGTERM');
  await exited(restarted);
  const second = await up('channel-after-send');
  const third = say('echo third');
  await exited(second);
  assert.equal(second.signalCode, 'SIGKILL', 'died between the send and its record');
  await up();
  const recorded = await eventually(
    'the reply recorded',
    async () =>
      (await store.listChannelOutbox('dc1')).find((o) => o.replyTo === third.id && o.status === 'sent'),
    30_000,
  );
  const posted = discord.botMessages().filter((m) => m.message_reference?.message_id === third.id);
  assert.equal(posted.length, 1, 'not posted twice');
  assert.deepEqual(recorded.platformMessageIds, [posted[0]!.id], 'the first post recorded');
  const sends = discord
    .callsOf('POST', `/channels/${C1}/messages`)
    .filter((c) => c.body?.content === 'third\n');
  assert.equal(sends.length, 2, 'sent again after the kill, with the same nonce');
  assert.equal(sends[0]!.body!.nonce, sends[1]!.body!.nonce);

  assert.deepEqual(
    await inbound(),
    [
      'cat inbox/note.txt\n# attached: inbox/note.txt (16 bytes)',
      'echo dm',
      'echo dm while down',
      'echo dropped',
      'echo hello',
      'echo limited',
      'echo racing',
      'echo third',
      'echo while down',
      'mkdir -p outbox && printf report > outbox/r.txt && echo done',
    ],
    'each message once; no stranger',
  );
  assert.equal(discord.botMessages().length, 12, 'ten replies, a file and a refusal: nothing twice');
});
