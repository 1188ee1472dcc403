/** The path policy of a live sandbox's files, by its text: what stays in the workspace and what is refused. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isBerthError } from './errors.js';
import { workspaceSegments } from './sandbox-files.js';

test('a path inside the workspace becomes its segments under the root', () => {
  const cases: [string, string[]][] = [
    ['', []],
    ['.', []],
    ['a.txt', ['a.txt']],
    ['src//lib/./x.ts/', ['src', 'lib', 'x.ts']],
    ['a/../b', ['b']],
    ['/workspace', []],
    ['/workspace/src/a', ['src', 'a']],
    ['/workspace/a/../b', ['b']],
    ['é and spaces', ['é and spaces']],
  ];
  for (const [path, segments] of cases) assert.deepEqual(workspaceSegments(path), segments, path);
});

test('a path leaving the workspace by its text is PATH_OUTSIDE_WORKSPACE, naming why', () => {
  const cases: [string, RegExp][] = [
    ['../x', /climbs above the workspace/],
    ['a/../../x', /climbs above the workspace/],
    ['/workspace/../etc/passwd', /climbs above the workspace/],
    ['/etc/passwd', /absolute outside \/workspace: give it relative/],
    ['/workspaces/x', /absolute outside \/workspace/],
    ['a\0b', /NUL/],
    [Buffer.from([0x61, 0xff, 0x62]).toString('utf8'), /not valid UTF-8/],
  ];
  for (const [path, why] of cases)
    assert.throws(
      () => workspaceSegments(path),
      (err: unknown) => isBerthError(err, 'PATH_OUTSIDE_WORKSPACE') && why.test(err.message),
      JSON.stringify(path),
    );
});
