import assert from 'node:assert/strict';
import { test } from 'node:test';
import { signSandboxToken, verifySandboxToken } from './token.js';

const SECRET = Buffer.from('0123456789abcdef0123456789abcdef');
const BASE = 1_700_000_000_000;

test('a signed token verifies to its claims, whatever characters the session id has', () => {
  for (const sessionId of ['s1', 'A.b_c', 'x.y.z-1']) {
    const claims = { sessionId, generation: 3, expiresAt: BASE + 1000 };
    assert.deepEqual(verifySandboxToken(SECRET, signSandboxToken(SECRET, claims), BASE), claims);
  }
});

test('tampered, foreign-secret, expired and malformed tokens are refused', () => {
  const token = signSandboxToken(SECRET, { sessionId: 's1', generation: 3, expiresAt: BASE + 1000 });
  const cases: [string, string, number][] = [
    ['generation raised', token.replace(/\.3\./, '.4.'), BASE],
    [
      'other secret',
      signSandboxToken(Buffer.from('x'.repeat(32)), {
        sessionId: 's1',
        generation: 3,
        expiresAt: BASE + 1000,
      }),
      BASE,
    ],
    ['expired', token, BASE + 1000],
    ['malformed', 'v1.s1.3', BASE],
    ['empty', '', BASE],
  ];
  for (const [name, candidate, now] of cases)
    assert.equal(verifySandboxToken(SECRET, candidate, now), null, name);
});
