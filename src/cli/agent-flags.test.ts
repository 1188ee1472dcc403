import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Command } from 'commander';
import { fieldCases } from '../../test/helpers/agent-field-cases.js';
import { agentSpecSchema, checkAgentSpec, isBerthError } from '../core/index.js';
import { addAgentFlags, egressOf, mountOf, specFromFlags } from './agent-flags.js';

function flagsSpec(argv: string[], mode: 'create' | 'update' = 'create'): Record<string, unknown> {
  const cmd = addAgentFlags(new Command('x').exitOverride().configureOutput({ writeErr: () => {} }), mode);
  const withProvider =
    mode === 'create' && !argv.includes('--provider') ? ['--provider', 'command', ...argv] : argv;
  cmd.parse(withProvider, { from: 'user' });
  return specFromFlags(cmd.opts());
}

test('every agent field but the name has a flag case', () => {
  const fields = Object.keys(agentSpecSchema.shape).filter((f) => f !== 'name');
  assert.deepEqual(
    fieldCases()
      .map((c) => c.field)
      .sort(),
    fields.sort(),
  );
});

for (const c of fieldCases())
  test(`flags set ${c.field}, and the spec they give passes the schema`, () => {
    const spec = flagsSpec(c.argv);
    for (const [key, value] of Object.entries(c.expect)) assert.deepEqual(spec[key], value, key);
    const check = checkAgentSpec({ name: 'a', ...spec });
    assert.ok(check.ok, JSON.stringify(check));
  });

test('update: flags left out are left out of the patch (no defaults sneak in)', () => {
  assert.deepEqual(flagsSpec(['--memory', '64'], 'update'), { memoryMb: 64 });
  assert.deepEqual(flagsSpec([], 'update'), {});
});

test('a number flag refuses what is not one, before anything is sent', () => {
  assert.throws(() => flagsSpec(['--memory', 'lots']), /not a number/);
  assert.throws(() => flagsSpec(['--pids', '1.5']), /not a whole number/);
  assert.throws(() => flagsSpec(['--isolation', 'kata']), /Allowed choices are runc, runsc/);
});

test('--egress-header and --mount refuse a malformed rule with the form to use', () => {
  assert.throws(
    () => egressOf([], ['api.github.com:443 Authorization']),
    (err: unknown) => isBerthError(err, 'INVALID_INPUT') && /:443=Authorization: Bearer/.test(err.hint),
  );
  assert.throws(
    () => mountOf('/srv:data:rw'),
    (err: unknown) => isBerthError(err, 'INVALID_INPUT') && /read-only/.test(err.message),
  );
  assert.throws(
    () => mountOf('/srv'),
    (err: unknown) => isBerthError(err, 'INVALID_INPUT'),
  );
  assert.equal(egressOf([], []), undefined);
});

test('retention: one policy a flag, --keep-all alone; two policies are refused by the check', () => {
  assert.deepEqual(flagsSpec(['--keep-days', '7'], 'update'), { retention: { days: 7 } });
  assert.deepEqual(flagsSpec(['--keep-all'], 'update'), { retention: { all: true } });
  assert.throws(() => flagsSpec(['--keep-all', '--keep-versions', '3']), /cannot be used with/);
  const both = checkAgentSpec({ name: 'a', provider: 'command', retention: { versions: 3, days: 1 } });
  assert.ok(!both.ok && JSON.stringify(both).includes('name one policy'), JSON.stringify(both));
});
