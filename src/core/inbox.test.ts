/** The rules of a message's files: safe names, unique names, the data read back. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { inboxFilesOf, safeInboxName, uniqueInboxName } from './inbox.js';

test('a file name becomes one safe path segment', () => {
  const cases: Array<[string, string, string]> = [
    ['a plain name stays', 'report.pdf', 'report.pdf'],
    ['directories are cut', '../../etc/passwd', 'passwd'],
    ['backslashes too', 'C:\\Users\\me\\a.txt', 'a.txt'],
    ['no leading dot', '.bashrc', 'bashrc'],
    ['dots alone are nothing', '..', 'file-1'],
    ['control characters go', 'a\u0000b\nc.txt', 'abc.txt'],
    ['empty gets the fallback', '', 'file-1'],
    ['long names keep their extension', `${'x'.repeat(300)}.tar.gz`, `${'x'.repeat(117)}.gz`],
  ];
  for (const [name, input, want] of cases) assert.equal(safeInboxName(input, 'file-1'), want, name);
});

test('names already taken get a number before the extension', () => {
  assert.equal(uniqueInboxName('a.txt', new Set()), 'a.txt');
  assert.equal(uniqueInboxName('a.txt', new Set(['a.txt', 'a-2.txt'])), 'a-3.txt');
  assert.equal(uniqueInboxName('README', new Set(['README'])), 'README-2');
});

test('the files of a message data, and nothing from data that is not a channel file list', () => {
  const file = { name: 'a.txt', key: 'channel-files/tg1/1-2-0', size: 3 };
  assert.deepEqual(inboxFilesOf({ inbox: [file] }), [file]);
  assert.deepEqual(inboxFilesOf(null), []);
  assert.deepEqual(inboxFilesOf({ inbox: 'x' }), []);
  assert.deepEqual(
    inboxFilesOf({ inbox: [{ ...file, name: '../x' }, { name: 'b' }] }),
    [],
    'unsafe or partial',
  );
});
