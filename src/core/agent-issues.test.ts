import assert from 'node:assert/strict';
import { test } from 'node:test';
import { checkAgentSpec, formatPath, parseAgentSpec } from './agent-issues.js';
import { isBerthError } from './errors.js';

test('a bad agent file gets one issue per wrong field, each with its path in the file and a fix', () => {
  const check = checkAgentSpec({
    name: 'bad name',
    provider: 'commandd',
    isolation: 'kata',
    memoryMb: 8,
    cpus: 'two',
    egress: [
      '127.0.0.1:9000',
      'example.com',
      { target: 'api.github.com:443', headers: { Auth: '{{secrett:x}}' } },
    ],
    mounts: [{ hostPath: '/srv', containerPath: '../etc' }],
    recycle: { maxAgeMs: 10 },
    memoryMB: 4,
  });
  assert.equal(check.ok, false);
  const issues = check.ok ? [] : check.issues;
  assert.deepEqual(
    issues.map((i) => i.path),
    [
      'name',
      'provider',
      'isolation',
      'memoryMb',
      'cpus',
      'egress[1]',
      'egress[2].headers.Auth',
      'recycle.maxAgeMs',
      'mounts[0].containerPath',
      'memoryMB',
    ],
  );
  const byPath = Object.fromEntries(issues.map((i) => [i.path, i]));
  assert.equal(byPath.memoryMb!.fix, 'use at least 16');
  assert.equal(byPath.isolation!.fix, 'use one of: runc, runsc');
  assert.equal(byPath.cpus!.fix, 'give a number');
  assert.match(byPath['egress[1]']!.message, /"example.com"/);
  assert.match(byPath['egress[1]']!.fix, /host:port/);
  assert.match(byPath.memoryMB!.fix, /remove it/);
  for (const issue of issues) assert.ok(issue.fix.length > 0, issue.path);
});

test('cross-field rules come as issues too, after the schema accepts the fields', () => {
  const check = checkAgentSpec({ name: 'm', provider: 'anthropic', recycle: { maxAgeMs: 5000 } });
  assert.deepEqual(check.ok ? [] : check.issues.map((i) => i.path), ['model', 'recycle']);
});

test('a required field left out says so; a whole-list rule names the list', () => {
  const check = checkAgentSpec({ name: 'x', egress: ['a.b:1', 'a.b:1'] });
  assert.deepEqual(check.ok ? [] : check.issues.map((i) => [i.path, i.message]), [
    ['provider', 'is required'],
    ['egress', 'a list of 2 is not valid'],
  ]);
});

test('an egress entry of neither form says so; one shaped as a rule gets the issues of the rule form', () => {
  const check = checkAgentSpec({
    name: 'x',
    provider: 'command',
    egress: [5, { target: 'a.b:1', header: {} }],
  });
  assert.deepEqual(check.ok ? [] : check.issues.map((i) => [i.path, i.message]), [
    ['egress[0]', '5 is neither form'],
    ['egress[1].headers', 'is required'],
    ['egress[1].header', 'is not a field of an agent here'],
  ]);
});

test('parseAgentSpec throws INVALID_INPUT listing every issue; a good spec comes back with its defaults', () => {
  assert.throws(
    () => parseAgentSpec({ name: 'x', provider: 'command', memoryMb: 1, pidsLimit: 1 }),
    (err: unknown) => isBerthError(err, 'INVALID_INPUT') && /memoryMb: .*; pidsLimit: /.test(err.message),
  );
  const spec = parseAgentSpec({ name: 'x', provider: 'command' });
  assert.equal(spec.memoryMb, 512);
  assert.equal(spec.isolation, 'runc');
});

test('formatPath writes paths as a person does', () => {
  assert.equal(formatPath(['egress', 1, 'headers', 'X-Api-Key']), 'egress[1].headers.X-Api-Key');
  assert.equal(formatPath(['egress', 0, 'headers', 'a b']), 'egress[0].headers["a b"]');
});
