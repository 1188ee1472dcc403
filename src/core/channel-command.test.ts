import assert from 'node:assert/strict';
import { test } from 'node:test';
import { channelInterruptText, channelStatusText, parseChannelCommand } from './channel-command.js';

test('parseChannelCommand: exactly /status or /interrupt, with a bot name at most', () => {
  const cases: [string, ReturnType<typeof parseChannelCommand>][] = [
    ['/status', 'status'],
    ['  /interrupt\n', 'interrupt'],
    ['/status@berth_bot', 'status'],
    ['/Status', null],
    ['/status now', null],
    ['please /status', null],
    ['/stat', null],
    ['/interrupt@', null],
    ['status', null],
    ['', null],
  ];
  for (const [text, want] of cases) assert.equal(parseChannelCommand(text), want, JSON.stringify(text));
});

test('channelStatusText: state, queue place when queued, messages waiting; no session yet', () => {
  assert.equal(
    channelStatusText({ id: 'tg-tg1-100', status: 'queued', queuePosition: 3, pending: 2 }),
    'Session tg-tg1-100: queued, position 3 in the queue, 2 messages waiting.',
  );
  assert.equal(
    channelStatusText({ id: 'tg-tg1-100', status: 'running', queuePosition: null, pending: 1 }),
    'Session tg-tg1-100: running, 1 message waiting.',
  );
  assert.match(channelStatusText(null), /No session yet/);
});

test('channelInterruptText: says what the interrupt did', () => {
  assert.match(channelInterruptText('interrupted'), /^Interrupted the running turn/);
  assert.match(channelInterruptText('already-interrupting'), /already being interrupted/);
  assert.match(channelInterruptText('nothing-running'), /^Nothing is running/);
});
