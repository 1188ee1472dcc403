/**
 * An email channel end to end, against Debian's real Postfix and Dovecot (helpers/
 * mail-servers.ts: private instances on loopback ports, Postfix delivering to Dovecot over
 * LMTP): a real `berth up` (child process, real sandboxes, a `command` agent) reads the
 * bot's mailbox over IMAP IDLE and replies over SMTP. A mail sent through Postfix gets one
 * reply in the sender's mailbox, threaded (Re: Subject, In-Reply-To, References); an answer
 * in that thread reaches the same session, and only a thread's first mail tells the agent its
 * Subject; a stranger is refused once; an attachment is in inbox/ for the turn, and a file
 * it writes under outbox/ comes back attached; a mail with no Subject and no text reaches
 * nobody and is still acknowledged. berth SIGKILLed before a mail's commit,
 * after it (before its \Seen), and between a reply's send and its record: every mail
 * enqueued once, every reply in the sender's mailbox once, the first send's Message-ID
 * recorded.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { channelInstall, inboundTexts } from './helpers/channel-install.js';
import { MAIL_DOMAIN, MailServers, mailServersMissing } from './helpers/mail-servers.js';
import { eventually, exited } from './helpers/processes.js';

const USERS = { bot: 'bot-pw', alice: 'alice-pw', eve: 'eve-pw' };
const BOT = `bot@${MAIL_DOMAIN}`;
const ALICE = `alice@${MAIL_DOMAIN}`;
const EVE = `eve@${MAIL_DOMAIN}`;

test('email: mail through Postfix and Dovecot enqueued once by Message-ID, replies threaded in the sender mailbox, a stranger refused once, a mail without text acknowledged, SIGKILL before and after the commit and after the send: nothing lost, nothing twice', {
  timeout: 180_000,
  skip: mailServersMissing,
}, async (t) => {
  const mail = await new MailServers().start(USERS);
  const {
    up,
    cli,
    store: storeOf,
  } = await channelInstall(t, {
    env: {},
    secrets: { 'mail-pw': USERS.bot },
    closePlatform: () => mail.stop(),
  });
  const first = await up();
  const store = storeOf();
  await cli('agent', 'create', 'sh', '--provider', 'command');
  const add = [
    'channel',
    'add',
    'email',
    '--name',
    'em1',
    '--agent',
    'sh',
    '--token-secret',
    'mail-pw',
    '--allow',
    ALICE,
    '--map',
    'per-thread',
  ];
  const missing = await cli(...add).catch((err: Error) => err.message);
  assert.match(missing, /needs --address, --imap-host, --smtp-host/, 'the flags to add named');
  assert.match(
    await cli(
      ...add,
      '--address',
      BOT,
      '--imap-host',
      '127.0.0.1',
      '--imap-port',
      String(mail.imapPort),
      '--imap-security',
      'none',
      '--smtp-host',
      '127.0.0.1',
      '--smtp-port',
      String(mail.smtpPort),
      '--smtp-security',
      'none',
    ),
    /em1\temail\tagent sh\tper-thread.*address bot@berth.test/,
  );

  let sent = 0;
  const send = async (
    from: string,
    text: string,
    o: { subject?: string; thread?: string[]; files?: Record<string, string> } = {},
  ) => {
    const messageId = `<t${++sent}.${Date.now()}@${MAIL_DOMAIN}>`;
    await mail.send({
      from,
      to: BOT,
      subject: o.subject ?? `Question ${sent}`,
      messageId,
      text,
      attachments: Object.entries(o.files ?? {}).map(([filename, content]) => ({ filename, content })),
      ...(o.thread ? { inReplyTo: o.thread.at(-1), references: o.thread } : {}),
    });
    return messageId;
  };
  const replyTo = (user: keyof typeof USERS, messageId: string) =>
    eventually(
      `a reply to ${messageId}`,
      async () => (await mail.inbox(user, USERS[user])).find((m) => m.inReplyTo === messageId),
      30_000,
    );

  // A mail gets one reply from the bot, threaded under it.
  const hello = await send(ALICE, 'echo hello', { subject: 'Question' });
  const reply = await replyTo('alice', hello);
  assert.equal(reply.from, BOT);
  assert.equal(reply.subject, 'Re: Question');
  assert.equal(reply.references, hello);
  assert.equal(reply.text, 'hello');
  // An answer in that thread (quoting the reply) reaches the same session; its reply references the whole thread.
  const again = await send(ALICE, `echo again\n\nOn Monday, bot wrote:\n> hello\n`, {
    subject: 'Re: Question',
    thread: [hello, reply.messageId],
  });
  const second = await replyTo('alice', again);
  assert.equal(second.references, [hello, reply.messageId, again].join(' '));
  const threadSessions = (await store.listSessionViews(Date.now())).filter((s) => s.id.startsWith('em-'));
  assert.equal(threadSessions.length, 1, 'one session for the thread');

  // A stranger: one refusal, then silence; nothing reaches the agent.
  const pwned = await send(EVE, 'echo pwned');
  assert.match((await replyTo('eve', pwned)).text, /not passed on/);
  // Files both ways: an attachment is in inbox/ for the turn; what it writes under outbox/
  // comes back as a mail of its own in the thread, attached.
  const files = await send(ALICE, 'cat inbox/notes.txt; mkdir -p outbox; printf report > outbox/r.txt', {
    files: { 'notes.txt': 'from alice' },
  });
  const fileReplies = await eventually(
    'the reply and the file back',
    async () => {
      const replies = (await mail.inbox('alice', USERS.alice)).filter((m) => m.inReplyTo === files);
      return replies.length === 2 ? replies : undefined;
    },
    30_000,
  );
  assert.equal(fileReplies[0]!.text, 'from alice', 'the attachment was in inbox/');
  assert.match(fileReplies[1]!.text, /filename=r\.txt[\s\S]*cmVwb3J0/, 'r.txt attached, base64 of "report"');
  // A mail with no Subject and no text: acknowledged, answered by nobody.
  const empty = await send(ALICE, '', { subject: '' });
  await eventually('the textless mail acknowledged', async () =>
    (await mail.inbox('bot', USERS.bot)).find((m) => m.messageId === empty && m.seen),
  );

  // Each kill below must hit the mail sent for it: first every mail (the bot's own copies too) acknowledged.
  const allSeen = (last: string) =>
    eventually(`every mail in the bot mailbox acknowledged, up to ${last}`, async () => {
      const box = await mail.inbox('bot', USERS.bot);
      return box.some((m) => m.messageId === last) && box.every((m) => m.seen) ? true : undefined;
    });
  await allSeen(await send(EVE, 'echo pwned again'));

  // SIGKILL between a mail's arrival and its commit, and between the commit and its \Seen.
  first.kill('SIGTERM');
  await exited(first);
  for (const [failpoint, text] of [
    ['channel-before-commit', 'echo racing'],
    ['channel-after-commit', 'echo acked'],
  ] as const) {
    const killed = await up(failpoint);
    const id = await send(ALICE, text);
    await exited(killed);
    assert.equal(killed.signalCode, 'SIGKILL', `died at ${failpoint}`);
    const next = await up();
    await allSeen((await replyTo('alice', id)).messageId);
    next.kill('SIGTERM');
    await exited(next);
  }

  // SIGKILL between a reply's send and its record: its copy in the bot's mailbox is found, nothing sent again.
  const killed = await up('channel-after-send');
  const third = await send(ALICE, 'echo third');
  await exited(killed);
  assert.equal(killed.signalCode, 'SIGKILL', 'died between the send and its record');
  await up();
  const recorded = await eventually(
    'the reply recorded',
    async () =>
      (await store.listChannelOutbox('em1')).find((o) => o.replyTo === third && o.status === 'sent'),
    30_000,
  );
  const thirdReplies = (await mail.inbox('alice', USERS.alice)).filter((m) => m.inReplyTo === third);
  assert.equal(thirdReplies.length, 1, 'not sent twice');
  assert.deepEqual(recorded.platformMessageIds, [thirdReplies[0]!.messageId], 'the first send recorded');
  assert.equal(recorded.attempts, 2, 'taken again after the kill');

  // A thread's first mail tells the agent its Subject (a comment line); its answers do not.
  const texts = await inboundTexts(store, 'em');
  assert.ok(texts.includes('# subject: Question\necho hello'), texts.join(' | '));
  assert.deepEqual(
    texts.map((text) => text.replace(/^# subject: Question \d+\n/, '')).sort(),
    [
      'cat inbox/notes.txt; mkdir -p outbox; printf report > outbox/r.txt\n# attached: inbox/notes.txt (10 bytes)',
      'echo acked',
      'echo again',
      'echo racing',
      'echo third',
      '# subject: Question\necho hello',
    ].sort(),
    'each mail once; no stranger, no textless mail, none of the bot own copies',
  );
  assert.equal(
    (await mail.inbox('alice', USERS.alice)).length,
    7,
    'seven replies (a file among them), nothing twice',
  );
  assert.equal((await mail.inbox('eve', USERS.eve)).length, 1, 'one refusal');
  assert.ok(
    (await mail.inbox('bot', USERS.bot)).every((m) => m.seen),
    'every mail acknowledged, the bot own copies too',
  );
});
