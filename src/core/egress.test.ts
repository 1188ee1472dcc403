import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agentSpecSchema } from './agent.js';
import { egressRules, egressSchema, fillTemplate, isHeaderValue, templateSecrets } from './egress.js';

const firstIssue = (value: unknown) => {
  const parsed = egressSchema.safeParse(value);
  assert.equal(parsed.success, false, `should be refused: ${JSON.stringify(value)}`);
  const issue = parsed.error!.issues[0]!;
  return `${issue.path.join('.')}: ${issue.message}`;
};

test('egress entries: plain targets and targets with header rules, lower-cased, as rules', () => {
  const entries = egressSchema.parse([
    'Example.org:443',
    { target: 'API.github.com:443', headers: { Authorization: 'Bearer {{secret:github}}' } },
  ]);
  assert.deepEqual(egressRules(entries), [
    { target: 'example.org:443', headers: {} },
    { target: 'api.github.com:443', headers: { Authorization: 'Bearer {{secret:github}}' } },
  ]);
  const agent = agentSpecSchema.parse({ name: 'a', provider: 'command', egress: ['127.0.0.1:80'] });
  assert.deepEqual(agent.egress, ['127.0.0.1:80'], 'the string form is kept as it is');
});

test('egress entries: bad targets, header names and templates are refused with a clear message', () => {
  assert.match(firstIssue(['example.org']), /^0: each target is "host:port"/);
  assert.match(
    firstIssue([{ target: 'a.b:443', headers: { 'Bad Name': 'x' } }]),
    /^0\.headers\.Bad Name: header names/,
  );
  assert.match(
    firstIssue([{ target: 'a.b:443', headers: { Host: 'x' } }]),
    /host, framing and proxy headers/,
  );
  assert.match(firstIssue([{ target: 'a.b:443', headers: { 'Proxy-Authorization': 'x' } }]), /proxy headers/);
  assert.match(
    firstIssue([{ target: 'a.b:443', headers: { A: '{{env:HOME}}' } }]),
    /only placeholder is \{\{secret:NAME\}\}/,
  );
  assert.match(
    firstIssue([{ target: 'a.b:443', headers: { A: '{{secret:../x}}' } }]),
    /does not name a secret/,
  );
  assert.match(firstIssue([{ target: 'a.b:443', headers: { A: 'x\r\nInjected: 1' } }]), /visible ASCII/);
  assert.match(firstIssue([{ target: 'a.b:443', headers: {} }]), /1 to 16 headers/);
  assert.match(firstIssue([{ target: 'a.b:443', headers: { a: '1', A: '2' } }]), /named twice/);
  assert.match(firstIssue([{ target: 'a.b:443', headers: { a: '1' }, extra: true }]), /Unrecognized key/);
  assert.match(firstIssue(['a.b:443', { target: 'A.b:443', headers: { a: '1' } }]), /listed twice/);
});

test('templates: the secrets they name, filled in; a value that would break the header line is caught', () => {
  assert.deepEqual(templateSecrets('Bearer {{secret:github}} {{secret:other-1}}'), {
    names: ['github', 'other-1'],
  });
  assert.deepEqual(templateSecrets('static'), { names: [] });
  assert.equal(
    fillTemplate('token={{secret:a}};{{secret:b}}', { a: 'one', b: '$&two' }),
    'token=one;$&two',
    'secret values are inserted literally',
  );
  assert.equal(isHeaderValue('Bearer abc'), true);
  assert.equal(isHeaderValue('abc\r\nx: y'), false);
  assert.equal(isHeaderValue('abc\u0000'), false);
});
