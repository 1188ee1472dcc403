import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { BerthError, ERRORS } from './errors.js';

test('docs/errors.md lists every error code with its status', () => {
  const doc = readFileSync(new URL('../../../docs/errors.md', import.meta.url), 'utf8');
  for (const [code, spec] of Object.entries(ERRORS)) {
    assert.match(
      doc,
      new RegExp(`\\| \`${code}\` \\| ${spec.status} \\|`),
      `${code} missing from docs/errors.md`,
    );
  }
});

test('BerthError carries code, status, hint and cause', () => {
  const cause = new Error('root');
  const e = new BerthError('AGENT_NOT_FOUND', 'Agent x does not exist', { cause });
  assert.equal(e.status, 404);
  assert.equal(e.cause, cause);
  assert.deepEqual(e.toJSON().error.code, 'AGENT_NOT_FOUND');
  assert.match(e.hint, /berth agent create/);
});
