import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseAptMirror } from './apt-mirror.js';

test('the Debian mirror is read from one-line and deb822 apt sources', () => {
  const list = {
    deb822: false,
    text: [
      '# deb http://commented.example/debian bookworm main',
      'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main',
      'deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian/ bookworm main contrib',
    ].join('\n'),
  };
  const sources = {
    deb822: true,
    text: [
      'Types: deb',
      'URIs: http://disabled.example/debian',
      'Suites: bookworm',
      'Components: main',
      'Enabled: no',
      '',
      'Types: deb deb-src',
      '# a comment inside the stanza',
      'URIs: http://deb.example/debian',
      'Suites: bookworm bookworm-updates',
      'Components: main',
    ].join('\n'),
  };
  assert.equal(parseAptMirror([list, sources], 'bookworm'), 'http://mirror.example/debian');
  assert.equal(parseAptMirror([sources, list], 'bookworm'), 'http://deb.example/debian');
  assert.equal(parseAptMirror([sources], 'bookworm-updates'), 'http://deb.example/debian');
  assert.equal(parseAptMirror([list], 'trixie'), undefined);
});
