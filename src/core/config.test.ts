import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { test } from 'node:test';
import { blobsConfigOf, defaultSlots, loadConfig, redactUrl } from './config.js';
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
  const replicated = 'postgres://u:pw@h1:5432,h2:5433/berth?target_session_attrs=read-write';
  assert.equal(
    loadConfig({ BERTH_STORE: replicated }).store,
    replicated,
    'several hosts, as libpq writes them',
  );
});

test('blobs: file under the data dir by default; a file:// dir; an s3:// bucket with the AWS variables', () => {
  const def = loadConfig({ BERTH_DATA: '/srv/berth' });
  assert.deepEqual(def.blobs, { kind: 'file', dir: '/srv/berth/blobs' });
  assert.ok(Object.isFrozen(def.blobs));
  assert.deepEqual(blobsConfigOf(def), { kind: 'file', dir: '/srv/berth/blobs' });
  assert.deepEqual(loadConfig({ BERTH_BLOBS: 'file:///mnt/blobs/' }).blobs, {
    kind: 'file',
    dir: '/mnt/blobs',
  });
  const keys = { AWS_ACCESS_KEY_ID: 'AK', AWS_SECRET_ACCESS_KEY: 'SK' };
  assert.deepEqual(
    blobsConfigOf(
      loadConfig({ ...keys, BERTH_BLOBS: 's3://berth-blobs/prod/eu/', AWS_ENDPOINT_URL: 'http://rgw:7480/' }),
    ),
    {
      kind: 's3',
      bucket: 'berth-blobs',
      prefix: 'prod/eu/',
      endpoint: 'http://rgw:7480',
      region: 'us-east-1',
      accessKeyId: 'AK',
      secretAccessKey: 'SK',
    },
  );
  // AWS_ENDPOINT_URL_S3 wins over AWS_ENDPOINT_URL; the flag wins over BERTH_BLOBS.
  const s3 = blobsConfigOf(
    loadConfig(
      {
        ...keys,
        BERTH_BLOBS: 's3://other',
        AWS_ENDPOINT_URL: 'http://generic:1',
        AWS_ENDPOINT_URL_S3: 'https://s3.example:443',
        AWS_REGION: 'eu-west-3',
      },
      { blobs: 's3://berth' },
    ),
  );
  assert.equal(
    s3.kind === 's3' && `${s3.bucket}|${s3.prefix}|${s3.endpoint}|${s3.region}`,
    'berth||https://s3.example:443|eu-west-3',
  );
  const refused: [Record<string, string>, RegExp][] = [
    [
      { BERTH_BLOBS: 's3://berth' },
      /BERTH_BLOBS=s3:\/\/berth needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY/,
    ],
    [
      { ...keys, BERTH_BLOBS: 's3://UPPER' },
      /^Invalid BERTH_BLOBS="s3:\/\/UPPER": use file:\/\/\/absolute\/dir/,
    ],
    [{ ...keys, BERTH_BLOBS: 's3://berth/../x' }, /BERTH_BLOBS/],
    [{ BERTH_BLOBS: 'file://relative/dir' }, /BERTH_BLOBS/],
    [{ BERTH_BLOBS: '/plain/path' }, /BERTH_BLOBS/],
    [{ ...keys, BERTH_BLOBS: 's3://berth', AWS_ENDPOINT_URL_S3: 'rgw:7480' }, /AWS_ENDPOINT_URL_S3/],
    [{ AWS_REGION: 'Mars 1', AWS_SECRET_ACCESS_KEY: 'hunter2' }, /^Invalid AWS_REGION/],
  ];
  for (const [env, pattern] of refused)
    assert.throws(
      () => loadConfig(env),
      (err: unknown) =>
        isBerthError(err, 'CONFIG_INVALID') && pattern.test(err.message) && !/hunter2|SK/.test(err.message),
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
      /^Invalid BERTH_STORE="mysql:\/\/u:\*\*\*@db\/x": not a postgres:\/\/ URL: use postgres:\/\//,
    ],
    [{ BERTH_STORE: 'postgres://' }, /BERTH_STORE/],
    [
      { BERTH_STORE: 'postgres://u:hunter2@h1:5432,,h2/db' },
      /^Invalid BERTH_STORE="postgres:\/\/u:\*\*\*@h1:5432,,h2\/db": host 2 of "h1:5432,,h2" is empty/,
    ],
    [{ BERTH_STORE: 'postgres://h1:5432,h2:x/db' }, /host 2 of "h1:5432,h2:x": port "x" is not a number/],
    [
      { BERTH_STORE: 'postgres://h1,h2/db?target_session_attrs=read-only' },
      /target_session_attrs=read-only is not supported/,
    ],
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
