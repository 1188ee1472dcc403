import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePostgresUrl } from './postgres-url.js';

test('a libpq URL with several hosts becomes one single-host URL per host, in order', () => {
  const parsed = parsePostgresUrl(
    'postgres://berth:p%40ss@db1:5432,[::1]:5433,db3/berth?sslmode=disable&target_session_attrs=read-write',
  );
  assert.ok(parsed.ok);
  assert.deepEqual(parsed.target, {
    hosts: [
      { host: 'db1', port: 5432 },
      { host: '::1', port: 5433 },
      { host: 'db3', port: 5432 },
    ],
    targetSessionAttrs: 'read-write',
    hostUrls: [
      'postgres://berth:p%40ss@db1:5432/berth?sslmode=disable',
      'postgres://berth:p%40ss@[::1]:5433/berth?sslmode=disable',
      'postgres://berth:p%40ss@db3:5432/berth?sslmode=disable',
    ],
  });
  // Each one is what node-postgres parses.
  for (const url of parsed.target.hostUrls) assert.ok(URL.canParse(url), url);
});

test('one host: read-write unless the URL says any', () => {
  const cases: [string, string, string][] = [
    ['postgres://u@h/d', 'read-write', 'postgres://u@h:5432/d'],
    ['postgresql://h:6000/d?target_session_attrs=any', 'any', 'postgresql://h:6000/d'],
    ['postgres://h', 'read-write', 'postgres://h:5432'],
  ];
  for (const [url, attrs, single] of cases) {
    const parsed = parsePostgresUrl(url);
    assert.ok(parsed.ok, url);
    assert.equal(parsed.target.targetSessionAttrs, attrs, url);
    assert.deepEqual(parsed.target.hostUrls, [single], url);
  }
});

test('a malformed URL or host list is refused with the part that is wrong, never the password', () => {
  const cases: [string, RegExp][] = [
    ['mysql://u@h/d', /^not a postgres:\/\/ URL$/],
    ['postgres://', /^no host$/],
    ['postgres://u:secret@/d', /^no host$/],
    ['postgres://u:secret@h1,,h3/d', /^host 2 of "h1,,h3" is empty or not a host$/],
    ['postgres://h1,/d', /^host 2 of "h1," is empty/],
    [
      'postgres://h1:5432,h2:99999/d',
      /^host 2 of "h1:5432,h2:99999": port "99999" is not a number from 1 to 65535$/,
    ],
    ['postgres://h1:/d', /^host "h1:": port "" is not a number/],
    ['postgres://h1:0/d', /port "0"/],
    ['postgres://h1,h 2/d', /^host 2 of "h1,h 2" \("h 2"\) is not a valid host$/],
    ['postgres://h1/d?target_session_attrs=standby', /^target_session_attrs=standby is not supported/],
  ];
  for (const [url, why] of cases) {
    const parsed = parsePostgresUrl(url);
    assert.ok(!parsed.ok, url);
    assert.match(parsed.why, why, url);
    assert.ok(!parsed.why.includes('secret'), url);
  }
});
