/**
 * The channel routes: the secrets and modes each platform takes, and POST /v1/channels for
 * email through the HTTP layer (app.inject, real SQLite): settings defaulted, bad input named.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { loadConfig, systemClock } from '../core/index.js';
import { openSqliteStore } from '../store/index.js';
import { issueToken } from './api-tokens.js';
import { buildApp } from './app.js';
import { channelSecretsMisfit } from './channels-routes.js';

test('channelSecretsMisfit: each platform names the secrets and modes it uses, or the fix', () => {
  const cases: [string, Parameters<typeof channelSecretsMisfit>[0], RegExp | null][] = [
    ['telegram polling', { platform: 'telegram' }, null],
    ['telegram webhook', { platform: 'telegram', webhookUrl: 'https://b', signingSecret: 'h' }, null],
    [
      'telegram webhook without its secret',
      { platform: 'telegram', webhookUrl: 'https://b' },
      /--signing-secret/,
    ],
    ['telegram secret without a webhook', { platform: 'telegram', signingSecret: 'h' }, /--webhook-url/],
    ['telegram socket mode', { platform: 'telegram', appTokenSecret: 'a' }, /only Slack/],
    ['slack events', { platform: 'slack', signingSecret: 's' }, null],
    ['slack socket mode', { platform: 'slack', appTokenSecret: 'a' }, null],
    ['slack neither', { platform: 'slack' }, /--signing-secret.*--app-token-secret/],
    ['slack both', { platform: 'slack', signingSecret: 's', appTokenSecret: 'a' }, /one of them/],
    [
      'slack webhook url',
      { platform: 'slack', signingSecret: 's', webhookUrl: 'https://b' },
      /only Telegram/,
    ],
    ['discord', { platform: 'discord' }, null],
    ['discord signing secret', { platform: 'discord', signingSecret: 's' }, /drop it/],
  ];
  for (const [name, body, want] of cases) {
    const got = channelSecretsMisfit(body);
    if (want === null) assert.equal(got, null, name);
    else assert.match(got ?? '', want, name);
  }
});

test('channels: an email channel takes its servers (ports defaulted by security), allows senders lower-cased, and names what is missing', async () => {
  const config = loadConfig({});
  const store = openSqliteStore({ path: ':memory:', leaseMs: config.leaseMs, retry: config });
  const app = await buildApp({ config, store, clock: systemClock, log: pino({ level: 'silent' }) });
  const { token } = await issueToken(store, null, 'admin', Date.now());
  const post = async (payload: object) => {
    const res = await app.inject({
      method: 'POST',
      url: '/v1/channels',
      payload,
      headers: { authorization: `Bearer ${token}` },
    });
    return { status: res.statusCode, body: res.json() };
  };
  const agent = await app.inject({
    method: 'POST',
    url: '/v1/agents',
    payload: { name: 'sh', provider: 'command' },
    headers: { authorization: `Bearer ${token}` },
  });
  assert.equal(agent.statusCode, 201, agent.body);
  const base = { platform: 'email', agent: 'sh', tokenSecret: 'mail-pw', name: 'em1' };
  const email = { address: 'Bot@Example.com', imapHost: 'imap.example.com', smtpHost: 'smtp.example.com' };

  const created = await post({ ...base, email, allowUsers: ['Alice@Example.com', '@example.org'] });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.deepEqual(created.body.email, {
    address: 'bot@example.com',
    user: 'Bot@Example.com',
    imapHost: 'imap.example.com',
    imapPort: 993,
    imapSecurity: 'tls',
    mailbox: 'INBOX',
    smtpHost: 'smtp.example.com',
    smtpPort: 465,
    smtpSecurity: 'tls',
  });
  assert.deepEqual(created.body.allowUsers, ['alice@example.com', '@example.org']);
  const starttls = await post({
    ...base,
    name: 'em2',
    email: { ...email, smtpSecurity: 'starttls', imapSecurity: 'none' },
  });
  assert.deepEqual([starttls.body.email.smtpPort, starttls.body.email.imapPort], [587, 143]);

  const cases: [string, object, RegExp][] = [
    [
      'no servers',
      { ...base, name: 'em3' },
      /email: an email channel needs its servers and address \(--address/,
    ],
    [
      'servers on a chat platform',
      { ...base, name: 'em3', platform: 'telegram', email },
      /only an email channel/,
    ],
    ['chats on email', { ...base, name: 'em3', email, allowChats: ['42'] }, /allow senders with --allow/],
    [
      'a bad address',
      { ...base, name: 'em3', email: { ...email, address: 'bot' } },
      /address: like bot@example.com/,
    ],
    ['a bad sender', { ...base, name: 'em3', email, allowUsers: ['not an address'] }, /sender address/],
  ];
  for (const [name, body, message] of cases) {
    const res = await post(body);
    assert.equal(res.status, 400, name);
    assert.equal(res.body.error.code, 'INVALID_INPUT', name);
    assert.match(res.body.error.message, message, name);
  }
  await app.close();
  await store.close();
});
