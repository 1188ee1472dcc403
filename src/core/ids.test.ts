import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isBerthError } from './errors.js';
import { assertSessionId } from './ids.js';

test('session ids: narrow, no path tricks', () => {
  for (const ok of ['s1', 'demo-3', 'A.b_c', 'x'.repeat(64)]) assert.equal(assertSessionId(ok), ok);
  for (const bad of ['', '../etc', 'a/b', 'a..b', '.hidden', '-x', 'x'.repeat(65), 'a b', 'a:b']) {
    assert.throws(
      () => assertSessionId(bad),
      (e: unknown) => isBerthError(e, 'INVALID_SESSION_ID'),
      bad,
    );
  }
});
