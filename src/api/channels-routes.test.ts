import assert from 'node:assert/strict';
import { test } from 'node:test';
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
