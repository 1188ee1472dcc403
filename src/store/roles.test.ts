import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FullStoreOnly } from './roles.js';

type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

// Checked by the compiler: a Store method added without a role (or a role method dropped
// from the Store) makes this `false`, and `true` no longer fits.
const everyMethodHasARole: Same<FullStoreOnly, 'kind' | 'clock' | 'close' | 'listAudit'> = true;

test('every Store method is in some role but opening, closing, the clock and the audit listing', () => {
  assert.equal(everyMethodHasARole, true);
});
