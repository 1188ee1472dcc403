import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  assertStorageKey,
  decideStorageAccess,
  grantPrefixProblem,
  type StorageGrant,
  storageGrantInputSchema,
  storageKeyProblem,
} from './storage.js';

test('storage keys: relative paths of safe segments; each refusal names its rule', () => {
  const cases: [string, string, RegExp | null][] = [
    ['plain', 'photos/2026/a.jpg', null],
    ['spaces and unicode', 'notes/été 2026.md', null],
    ['dots inside a segment', 'a/..b/c..', null],
    ['empty', '', /is empty/],
    ['absolute', '/etc/passwd', /is absolute/],
    ['parent segment', 'photos/../../etc/passwd', /has a "\.\." segment/],
    ['leading parent', '../x', /has a "\.\." segment/],
    ['dot segment', 'a/./b', /has a "\." segment/],
    ['lone dot', '.', /has a "\." segment/],
    ['empty segment', 'a//b', /empty segment/],
    ['trailing slash', 'a/', /empty segment/],
    ['backslash', 'a\\..\\b', /backslash/],
    ['NUL', 'a\u0000b', /NUL or control/],
    ['newline', 'a\nb', /NUL or control/],
    ['overlong key', 'a/'.repeat(600), /longer than 1024 bytes/],
    ['overlong segment', 'x'.repeat(256), /segment longer than 255 bytes/],
  ];
  for (const [name, key, expected] of cases) {
    const problem = storageKeyProblem(key);
    if (expected === null) assert.equal(problem, null, name);
    else assert.match(problem ?? '', expected, name);
  }
  assert.throws(() => assertStorageKey('../x'), { code: 'INVALID_INPUT', message: /"\.\." segment/ });
});

test('grant prefixes are folders: empty (all keys) or segments ending in "/"', () => {
  assert.equal(grantPrefixProblem(''), null);
  assert.equal(grantPrefixProblem('photos/'), null);
  assert.equal(grantPrefixProblem('photos/2026/'), null);
  assert.match(grantPrefixProblem('photos') ?? '', /must end with "\/"/);
  assert.match(grantPrefixProblem('../') ?? '', /"\.\." segment/);
  assert.match(grantPrefixProblem('/') ?? '', /is empty/);
  const parsed = storageGrantInputSchema.parse({ prefix: 'p/', ops: ['list', 'read', 'list'] });
  assert.deepEqual(parsed.ops, ['read', 'list'], 'ops deduplicated, in canonical order');
  assert.equal(storageGrantInputSchema.safeParse({ prefix: 'p/', ops: [] }).success, false);
  assert.equal(storageGrantInputSchema.safeParse({ prefix: 'p/', ops: ['admin'] }).success, false);
});

test('decideStorageAccess: an op is allowed only under a prefix granted for it', () => {
  const grant = (prefix: string, ops: StorageGrant['ops']): StorageGrant => ({
    agent: 'a',
    prefix,
    ops,
    createdAt: 0,
  });
  const grants = [
    grant('photos/', ['read', 'list']),
    grant('inbox/', ['write', 'delete']),
    grant('', ['list']),
  ];
  const cases: [string, StorageGrant[], Parameters<typeof decideStorageAccess>[1], string, string][] = [
    ['read under a read grant', grants, 'read', 'photos/a.jpg', 'allow'],
    ['write under a read-only grant', grants, 'write', 'photos/a.jpg', 'deny'],
    ['read outside every read grant', grants, 'read', 'inbox/a', 'deny'],
    ['a sibling folder with the same start', grants, 'read', 'photos2/a.jpg', 'deny'],
    ['write under a write grant', grants, 'write', 'inbox/new', 'allow'],
    ['list of everything under the all-keys grant', grants, 'list', '', 'allow'],
    ['list inside a folder', [grant('photos/', ['list'])], 'list', 'photos/2026/', 'allow'],
    ['list wider than the folder', [grant('photos/', ['list'])], 'list', 'photo', 'deny'],
    ['no grants at all', [], 'read', 'x', 'deny'],
  ];
  for (const [name, given, op, target, action] of cases)
    assert.equal(decideStorageAccess(given, op, target).action, action, name);
  const denied = decideStorageAccess(grants, 'read', 'inbox/a');
  assert.equal(
    denied.action === 'deny' && denied.reason,
    'key "inbox/a" is outside the prefixes granted for read ("photos/")',
  );
  const none = decideStorageAccess([], 'delete', 'x');
  assert.equal(none.action === 'deny' && none.reason, 'no grant allows delete');
});
