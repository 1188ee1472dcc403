import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { SecretStore } from './secret-store.js';

async function tempFile(t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'berth-secrets-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return join(dir, 'secrets.json');
}

test('without a key: set, get, list names only, file mode 0600', async (t) => {
  const path = await tempFile(t);
  const store = new SecretStore({ path, key: '' });
  assert.equal(await store.get('anthropic'), undefined);
  await store.set('openai', 'sk-o');
  await store.set('anthropic', 'sk-a');
  await store.set('anthropic', 'sk-a2');
  assert.equal(await store.get('anthropic'), 'sk-a2');
  assert.deepEqual(await store.list(), ['anthropic', 'openai']);
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  await assert.rejects(store.set('../x', 'v'), /Secret name "..\/x" is not allowed/);
  await assert.rejects(store.set('x', ''), /non-empty value/);
});

test('with a key: values are AES-GCM sealed at rest, bound to their name, and need the key', async (t) => {
  const path = await tempFile(t);
  await new SecretStore({ path, key: '' }).set('old', 'plain-before-key');
  const store = new SecretStore({ path, key: 'correct horse' });
  await store.set('anthropic', 'sk-ant-SECRET-VALUE');
  const text = await readFile(path, 'utf8');
  assert.doesNotMatch(text, /sk-ant-SECRET-VALUE/);
  assert.doesNotMatch(text, /plain-before-key/, 'older plain values are sealed too');
  assert.equal((await stat(path)).mode & 0o777, 0o600);
  assert.equal(await store.get('anthropic'), 'sk-ant-SECRET-VALUE');
  assert.equal(await store.get('old'), 'plain-before-key');
  assert.deepEqual(await new SecretStore({ path, key: '' }).list(), ['anthropic', 'old']);

  await assert.rejects(new SecretStore({ path, key: 'wrong' }).get('anthropic'), {
    code: 'SECRET_STORE_LOCKED',
  });
  await assert.rejects(new SecretStore({ path, key: '' }).get('anthropic'), /BERTH_SECRET_KEY is not set/);
  await assert.rejects(new SecretStore({ path, key: '' }).set('x', 'y'), { code: 'SECRET_STORE_LOCKED' });

  // A sealed value copied under another name does not open: the name is authenticated.
  const file = JSON.parse(text);
  file.secrets.other = file.secrets.anthropic;
  await writeFile(path, JSON.stringify(file));
  await assert.rejects(store.get('other'), /does not decrypt/);
});
