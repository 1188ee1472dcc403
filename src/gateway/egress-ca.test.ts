import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { connect, createServer } from 'node:tls';
import { EgressCa } from './egress-ca.js';

test('egress CA: made once per dir (key 0600), reopened as is; leaves verify for names and IPv4', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'berth-ca-'));
  t.after(() => rm(root, { recursive: true, force: true }));
  const dir = join(root, 'egress-ca');
  const [a, b] = await Promise.all([EgressCa.open(dir), EgressCa.open(dir)]);
  assert.equal(a.certificatePem, b.certificatePem, 'two openers racing share one CA');
  assert.equal((await EgressCa.open(dir)).certificatePem, a.certificatePem);
  assert.equal((await stat(join(dir, 'ca-key.pem'))).mode & 0o777, 0o600);
  assert.equal((await stat(dir)).mode & 0o777, 0o700);

  for (const host of ['127.0.0.1', 'localhost']) {
    const { key, cert } = a.leafFor(host);
    const server = createServer({ key, cert }, (s) => s.end('hi'));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    const got = await new Promise<{ authorized: boolean; error?: string }>((resolve) => {
      const s = connect({
        host: '127.0.0.1',
        port,
        servername: host === 'localhost' ? host : undefined,
        ca: [a.certificatePem],
      });
      s.on('secureConnect', () => {
        resolve({ authorized: s.authorized });
        s.destroy();
      });
      s.on('error', (err) => resolve({ authorized: false, error: err.message }));
    });
    server.close();
    assert.deepEqual(got, { authorized: true }, host);
  }
  assert.equal(a.leafFor('localhost'), a.leafFor('localhost'), 'a leaf is cached per host');

  const other = await EgressCa.open(join(root, 'other'));
  assert.notEqual(other.certificatePem, a.certificatePem, 'every install has its own CA');
});
