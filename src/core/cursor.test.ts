/** The listings' cursors: what a page ends with comes back whole, and nothing else is taken for a cursor. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BY_CLAIM, BY_CREATION, BY_PREFIX, BY_SEQ } from './cursor.js';
import { isBerthError } from './errors.js';

test('a cursor gives back the key it was made from, a text part holding ":" or nothing included', () => {
  assert.deepEqual(BY_CREATION.decode(BY_CREATION.cursorOf({ createdAt: 17, id: 'a:b' })), [17, 'a:b']);
  assert.deepEqual(BY_PREFIX.decode(BY_PREFIX.cursorOf({ prefix: '' })), ['']);
  assert.deepEqual(BY_PREFIX.decode(BY_PREFIX.cursorOf({ prefix: 'x:/y/' })), ['x:/y/']);
  assert.deepEqual(BY_SEQ.decode(BY_SEQ.cursorOf({ id: 42 })), [42]);
  assert.deepEqual(BY_CLAIM.decode(BY_CLAIM.cursorOf({ fairKey: null, firstId: 9 })), [-1, 9]);
  // The session cursor's text is what it was before cursors were shared by every listing.
  assert.equal(BY_CREATION.cursorOf({ createdAt: 5, id: 's1' }), Buffer.from('5:s1').toString('base64url'));
});

test('anything a listing did not give is INVALID_INPUT naming the fix', () => {
  const text = (s: string) => Buffer.from(s).toString('base64url');
  for (const [keys, cursor] of [
    [BY_CREATION, 'bm9wZQ'],
    [BY_CREATION, text('x:s1')],
    [BY_CREATION, text('99999999999999999999:s1')],
    [BY_CREATION, text('-0:s1')],
    [BY_SEQ, text('1:2')],
    [BY_SEQ, '!!'],
    [BY_PREFIX, text('no-colon')],
    [BY_CLAIM, text('1')],
  ] as const)
    assert.throws(
      () => keys.decode(cursor),
      (e: unknown) =>
        isBerthError(e, 'INVALID_INPUT') && /pass the "next" of the previous page/.test(e.message),
      cursor,
    );
});
