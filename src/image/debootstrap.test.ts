import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createDebootstrapProgressParser } from './debootstrap.js';

test('debootstrap lines become counted phases', () => {
  const parse = createDebootstrapProgressParser();
  const lines = [
    'I: Retrieving InRelease ',
    'I: Resolving dependencies of required packages...',
    'I: Retrieving adduser 3.134',
    'I: Validating adduser 3.134',
    'I: Retrieving gcc-12-base 12.2.0-14+deb12u1',
    'I: Extracting adduser...',
    'I: Unpacking required packages...',
    'I: Unpacking adduser...',
    'I: Unpacking gcc-12-base:amd64...',
    'I: Configuring required packages...',
    'I: Configuring gcc-12-base:amd64...',
    'I: Configuring gcc-12-base:amd64...',
    'I: Base system installed successfully.',
  ];
  assert.deepEqual(
    lines.map((line) => parse(line)),
    [
      { phase: 'index' },
      { phase: 'resolve' },
      { phase: 'download', done: 1 },
      undefined,
      { phase: 'download', done: 2 },
      { phase: 'extract', done: 1 },
      undefined,
      { phase: 'unpack', done: 1, total: 2 },
      { phase: 'unpack', done: 2, total: 2 },
      undefined,
      { phase: 'configure', done: 1, total: 2 },
      { phase: 'configure', done: 1, total: 2 },
      undefined,
    ],
  );
});
