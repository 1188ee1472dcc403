import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  htmlToText,
  isAutomaticMail,
  type MailFields,
  mailText,
  mailThreadId,
  parseHeaderBlock,
  replyReferences,
  replySubject,
  sendMessageId,
  stripQuotedReply,
  toEmailInbound,
} from './email-message.js';

const BOT = 'bot@example.com';

function mail(over: Partial<MailFields> = {}): MailFields {
  return {
    messageId: '<a1@mua>',
    from: 'Alice@Example.com',
    subject: null,
    headers: new Map(),
    plain: 'hi',
    html: null,
    attachments: [],
    ...over,
  };
}

test('email: header blocks unfolded, names lower-cased', () => {
  const h = parseHeaderBlock('References: <a@x>\r\n <b@x>\r\nIn-Reply-To: <b@x>\r\n\r\n');
  assert.equal(h.get('references'), '<a@x> <b@x>');
  assert.equal(h.get('in-reply-to'), '<b@x>');
});

test('email: the quoted history of a reply is cut, the new text kept', () => {
  const cases: [string, string, string][] = [
    ['top-posted answer', 'yes, do it\n\nOn Mon, 1 Dec 2026, Bot wrote:\n> shall I?\n> \n', 'yes, do it'],
    ['no quote', 'echo hello\n', 'echo hello'],
    ['inline quote kept', '> shall I?\nyes\n', '> shall I?\nyes'],
    ['CRLF', 'ok\r\n\r\n> old\r\n', 'ok'],
  ];
  for (const [name, text, want] of cases) assert.equal(stripQuotedReply(text), want, name);
});

test('email: text from the plain part, else the HTML part, else nothing', () => {
  assert.equal(mailText({ plain: 'plain', html: '<p>html</p>' }), 'plain');
  assert.equal(mailText({ plain: null, html: '<p>a &amp; b</p><br>c<style>x{}</style>' }), 'a & b\n\nc');
  assert.equal(mailText({ plain: null, html: null }), '');
  assert.equal(htmlToText('<div>x</div><script>alert(1)</script>'), 'x\n');
});

test('email: automatic mail (Auto-Submitted, bulk Precedence) is never answered', () => {
  const cases: [string, Record<string, string>, boolean][] = [
    ['a person', {}, false],
    ['auto-submitted: no', { 'auto-submitted': 'no' }, false],
    ['vacation responder', { 'auto-submitted': 'auto-replied' }, true],
    ['bulk', { precedence: 'bulk' }, true],
    ['list', { precedence: 'list' }, true],
  ];
  for (const [name, headers, want] of cases)
    assert.equal(isAutomaticMail(new Map(Object.entries(headers))), want, name);
});

test('email: every mail of a thread names the same conversation, whoever answers', () => {
  const root = mailThreadId('<r@x>', new Map());
  assert.equal(mailThreadId('<b@x>', new Map([['in-reply-to', '<r@x>']])), root);
  assert.equal(mailThreadId('<c@x>', new Map([['references', '<r@x> <b@x>']])), root);
  assert.notEqual(mailThreadId('<other@x>', new Map()), root);
  assert.match(root, /^[0-9a-f]{16}$/);
});

test('email: a mail as an inbound message; the bot own copies and automatic mail reach nobody', () => {
  const inbound = toEmailInbound(mail(), BOT, '<uid.1.1@INBOX>');
  assert.deepEqual(
    inbound && [inbound.chatId, inbound.userId, inbound.username, inbound.messageId, inbound.text],
    ['alice@example.com', 'alice@example.com', 'example.com', '<a1@mua>', 'hi'],
  );
  assert.equal(toEmailInbound(mail({ from: 'BOT@example.com' }), BOT, '<f>'), null);
  assert.equal(
    toEmailInbound(mail({ headers: new Map([['auto-submitted', 'auto-generated']]) }), BOT, '<f>'),
    null,
  );
  assert.equal(
    toEmailInbound(mail({ messageId: null }), BOT, '<uid.7.3@INBOX>')?.messageId,
    '<uid.7.3@INBOX>',
  );
});

test('email: a thread first mail tells its Subject as a comment line, its answers do not; attachments are passed on', () => {
  const report = { id: '7.3.2', name: 'report.pdf', sizeBytes: null };
  const first = toEmailInbound(
    mail({ subject: 'Quarterly\u0007 report', attachments: [report] }),
    BOT,
    '<f>',
  );
  assert.equal(first?.text, '# subject: Quarterly  report\nhi');
  assert.deepEqual(first?.attachments, [report]);
  const answer = mail({ subject: 'Re: Quarterly report', headers: new Map([['in-reply-to', '<a0@mua>']]) });
  assert.equal(toEmailInbound(answer, BOT, '<f>')?.text, 'hi');
  assert.equal(toEmailInbound(mail({ subject: '  ', plain: null }), BOT, '<f>')?.text, '');
  assert.equal(toEmailInbound(mail(), BOT, '<f>')?.attachments, undefined);
});

test('email: a reply threads under its mail, with a Message-ID every attempt repeats', () => {
  assert.equal(replySubject('Question'), 'Re: Question');
  assert.equal(replySubject('RE: Question'), 'RE: Question');
  assert.equal(replySubject(null), 'Re: your message');
  assert.deepEqual(replyReferences('<r@x> <b@x>', '<c@x>'), ['<r@x>', '<b@x>', '<c@x>']);
  assert.deepEqual(replyReferences(undefined, '<c@x>'), ['<c@x>']);
  assert.equal(sendMessageId('em1', '12.0', BOT), '<berth.em1.12.0@example.com>');
  assert.equal(sendMessageId('em1', '12.0', BOT), sendMessageId('em1', '12.0', BOT));
});
