/** Which paths the MCP file tools take: relative ones inside the workspace, nothing else. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isBerthError } from '../core/index.js';
import { workspacePath } from './mcp-exec.js';

const CASES: { name: string; path: string; ok: boolean }[] = [
  { name: 'a plain file', path: 'f.txt', ok: true },
  { name: 'a nested file', path: 'src/a/b.ts', ok: true },
  { name: 'a dot segment', path: './src/x', ok: true },
  { name: 'dots inside a name', path: 'a/..b/c..', ok: true },
  { name: 'empty', path: '', ok: false },
  { name: 'absolute', path: '/etc/passwd', ok: false },
  { name: 'parent first', path: '../x', ok: false },
  { name: 'parent inside', path: 'a/../../x', ok: false },
  { name: 'parent last', path: 'a/..', ok: false },
];

for (const c of CASES)
  test(`workspacePath: ${c.name}`, () => {
    if (c.ok) return assert.equal(workspacePath(c.path, 'read_file'), c.path);
    assert.throws(
      () => workspacePath(c.path, 'read_file'),
      (err) => isBerthError(err, 'INVALID_INPUT') && /relative to the workspace/.test(err.hint),
    );
  });
