import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { defaultSlots, loadConfig, redactUrl } from './config.js';
import { CONFIG_OPTIONS, parseDurationMs, withConfigOptionsTable } from './config-options.js';
import { isBerthError } from './errors.js';

test('defaults resolve, frozen, with durations in ms', () => {
  const c = loadConfig({});
  assert.equal(c.apiPort, 7420);
  assert.equal(c.apiUrl, 'http://127.0.0.1:7420');
  assert.equal(c.leaseMs, 10_000);
  assert.equal(c.heartbeatTimeoutMs, 30_000);
  assert.equal(c.maxTries, 5);
  assert.ok(c.dataDir.endsWith('/.berth'));
  assert.ok(Object.isFrozen(c));
});

test('environment and overrides apply, durations take units', () => {
  const c = loadConfig(
    { BERTH_PORT: '9000', BERTH_HEARTBEAT_TIMEOUT: '3s', BERTH_LEASE: '1.5s' },
    { slots: 3 },
  );
  assert.equal(c.apiPort, 9000);
  assert.equal(c.heartbeatTimeoutMs, 3000);
  assert.equal(c.leaseMs, 1500);
  assert.equal(c.slots, 3);
});

test('the store: SQLite in the data dir by default, a postgres:// URL from BERTH_STORE or the flag', () => {
  assert.equal(loadConfig({}).store, '');
  assert.equal(loadConfig({ BERTH_STORE: 'postgres://u@db:5432/berth' }).store, 'postgres://u@db:5432/berth');
  assert.equal(
    loadConfig({ BERTH_STORE: 'postgres://a@x/y' }, { store: 'postgresql://b@z/w' }).store,
    'postgresql://b@z/w',
  );
});

test('a URL loses only its password when shown', () => {
  const cases = [
    ['postgres://u:p%40ss@h:5432/d', 'postgres://u:***@h:5432/d'],
    ['postgres://u@h/d', 'postgres://u@h/d'],
    ['postgres://h/d', 'postgres://h/d'],
  ];
  for (const [url, shown] of cases) assert.equal(redactUrl(url!), shown);
});

test('a bad value names its variable', () => {
  const cases: [Record<string, string>, RegExp][] = [
    [{ BERTH_PORT: 'eighty' }, /BERTH_PORT/],
    [{ BERTH_LEASE: '10 parsecs' }, /BERTH_LEASE.*not a duration/],
    [{ BERTH_MAX_TRIES: '0' }, /BERTH_MAX_TRIES/],
    [{ BERTH_HEARTBEAT_TIMEOUT: '1s' }, /must exceed BERTH_HEARTBEAT_INTERVAL/],
    [
      { BERTH_STORE: 'mysql://u:hunter2@db/x' },
      /^Invalid BERTH_STORE="mysql:\/\/u:\*\*\*@db\/x": use postgres:\/\//,
    ],
    [{ BERTH_STORE: 'postgres://' }, /BERTH_STORE/],
    [{ BERTH_RUNTIME: 'podman' }, /BERTH_RUNTIME/],
    [{ BERTH_KUBE_NODE_SELECTOR: 'zone' }, /BERTH_KUBE_NODE_SELECTOR.*label=value/],
    [{ BERTH_KUBE_NODE_SELECTOR: 'a=b=c' }, /BERTH_KUBE_NODE_SELECTOR/],
    [{ BERTH_KUBE_NAMESPACE: 'Berth_NS' }, /BERTH_KUBE_NAMESPACE.*namespace name/],
  ];
  for (const [env, pattern] of cases) {
    assert.throws(
      () => loadConfig(env),
      (err: unknown) => isBerthError(err, 'CONFIG_INVALID') && pattern.test(err.message),
    );
  }
});

test('parseDurationMs and defaultSlots', () => {
  assert.equal(parseDurationMs('250'), 250);
  assert.equal(parseDurationMs('2m'), 120_000);
  assert.equal(parseDurationMs('soon'), undefined);
  assert.equal(defaultSlots(2, 24 * 2 ** 30), 4);
  assert.equal(defaultSlots(8, 2 * 2 ** 30), 2);
  assert.equal(defaultSlots(1, 2 ** 29), 1);
});

test('Kubernetes settings: node selector pairs, and this host by default', () => {
  const c = loadConfig({
    BERTH_RUNTIME: 'kubernetes',
    BERTH_KUBE_NODE_SELECTOR: 'berth.dev/machine=vm, topology.kubernetes.io/zone=a',
  });
  assert.equal(c.runtime, 'kubernetes');
  assert.deepEqual(c.kubeNodeSelector, { 'berth.dev/machine': 'vm', 'topology.kubernetes.io/zone': 'a' });
  assert.deepEqual(loadConfig({}).kubeNodeSelector, { 'kubernetes.io/hostname': hostname() });
  assert.equal(loadConfig({}).kubeNamespace, 'berth');
});

test('docs/config.md shows the option table CONFIG_OPTIONS declares (node scripts/config-table.js rewrites it)', () => {
  const doc = readFileSync(new URL('../../../docs/config.md', import.meta.url), 'utf8');
  assert.equal(withConfigOptionsTable(doc), doc);
});

test('every option has its own variable, a unit and a doc, and a default unless it is derived at load', () => {
  const derived = new Set(['apiUrl', 'slots', 'mountAllowlistFile']);
  const envs = new Set<string>();
  for (const [key, o] of Object.entries(CONFIG_OPTIONS)) {
    assert.ok(!envs.has(o.env), `${key}: ${o.env} is used twice`);
    envs.add(o.env);
    assert.ok(o.unit && o.doc, `${key} has a unit and a doc`);
    assert.equal(
      'default' in o,
      !derived.has(key),
      `${key}: a default, or derived (with defaultDoc saying how)`,
    );
    if (derived.has(key)) assert.ok('defaultDoc' in o, `${key} says how its default is derived`);
  }
});
