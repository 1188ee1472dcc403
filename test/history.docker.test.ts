/**
 * A session's history through a real host (real Docker, SQLite, file blobs): a `command`
 * agent adds, changes, deletes, renames and writes binary files over turns; the API, the
 * SDK and the CLI show each turn, its diff and the files at an older version; once a
 * snapshot compacts the chain, a version before it is refused naming those still kept.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Berth } from '../src/client/index.js';
import { isBerthError } from '../src/core/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';

const run = promisify(execFile);
const BIN = new URL('../../bin/berth', import.meta.url).pathname;

test('history: each turn and its diff (added, modified, deleted, binary, renamed), files at an older version, a compacted version refused', async (t) => {
  // A snapshot once 3 layers follow the newest one: the fourth commit compacts versions 1-3 away.
  const { host } = await startTestHost(t, { BERTH_SNAPSHOT_LAYERS: '3' });
  const admin = new Berth({ url: host.url, token: host.adminToken });
  const { token } = await admin.tokens.create({ tenant: 'hist' });
  const berth = new Berth({ url: host.url, token });
  await berth.agents.create({ name: 'hist-sh', provider: 'command' });
  const send = async (text: string) => {
    await berth.sessions.send('h1', text, { agent: 'hist-sh' });
    await waitPromoted(host, 'h1');
  };

  await send(
    "printf 'one\\ntwo\\nthree\\n' > a.txt; printf 'bee\\n' > b.txt; printf 'moved along\\n' > old.txt; printf '\\211PNG\\000\\001' > img.bin",
  );
  await send(
    "printf 'one\\n2\\nthree\\n' > a.txt; rm b.txt; mv old.txt new.txt; printf '\\000\\002' >> img.bin; mkdir d; printf 'deep\\n' > d/x.txt",
  );

  const diff = await berth.sessions.diff('h1', 2);
  assert.deepEqual(
    diff.files.map((f) => [f.path, f.change, f.from ?? null, f.binary]),
    [
      ['a.txt', 'modified', null, false],
      ['b.txt', 'deleted', null, false],
      ['d/x.txt', 'added', null, false],
      ['img.bin', 'modified', null, true],
      ['new.txt', 'renamed', 'old.txt', false],
    ],
  );
  const byPath = Object.fromEntries(diff.files.map((f) => [f.path, f]));
  assert.equal(byPath['a.txt']!.diff, '@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n');
  assert.equal(byPath['b.txt']!.diff, '@@ -1 +0,0 @@\n-bee\n');
  assert.equal(byPath['d/x.txt']!.diff, '@@ -0,0 +1 @@\n+deep\n');
  assert.deepEqual(
    [byPath['img.bin']!.before?.size, byPath['img.bin']!.after?.size, byPath['img.bin']!.diff],
    [6, 8, undefined],
  );
  assert.deepEqual(diff.counts, { added: 1, modified: 2, deleted: 1, renamed: 1 });
  const first = await berth.sessions.diff('h1', 1);
  assert.deepEqual(first.counts, { added: 4, modified: 0, deleted: 0, renamed: 0 });

  const turn = await berth.sessions.turn('h1', 2);
  assert.equal(turn.turn.id, diff.turnId);
  assert.deepEqual(
    [turn.version, turn.turn.status, turn.attempts.length, turn.faults],
    [2, 'committed', 1, []],
  );
  assert.match(turn.messages[0]!.text, /^printf 'one\\n2/);
  assert.equal(turn.replies.length, 1);
  assert.deepEqual(await berth.sessions.turn('h1', turn.turn.id), turn);

  const v1 = await berth.sessions.files('h1', { version: 1 });
  assert.deepEqual(v1.type === 'dir' && v1.entries.map((e) => e.name), [
    'a.txt',
    'b.txt',
    'img.bin',
    'old.txt',
  ]);
  const a1 = await berth.sessions.files('h1', { version: 1, path: 'a.txt' });
  assert.equal(a1.type === 'file' && a1.content.toString(), 'one\ntwo\nthree\n');
  const now = await berth.sessions.files('h1', { path: 'd/x.txt' });
  assert.deepEqual([now.type, now.version], ['file', 2]);
  await assert.rejects(berth.sessions.files('h1', { version: 2, path: 'b.txt' }), (e) =>
    isBerthError(e, 'WORKSPACE_PATH_NOT_FOUND'),
  );

  // The CLI, as a user runs it (not a terminal: plain text).
  const env = { ...process.env, BERTH_URL: host.url, BERTH_TOKEN: token, NO_COLOR: '1' };
  const cli = async (...args: string[]) => (await run(BIN, args, { env })).stdout;
  const history = await cli('session', 'history', 'h1');
  assert.match(history, /^VERSION\s+STATUS\s+MESSAGES/);
  assert.match(history, /\n2\s+committed\s+#\d+/);
  const shown = await cli('session', 'diff', 'h1', '2');
  assert.match(shown, /diff --berth a\/old.txt b\/new.txt\nrename from old.txt\nrename to new.txt/);
  assert.match(shown, /--- a\/a.txt\n\+\+\+ b\/a.txt\n@@ -1,3 \+1,3 @@\n one\n-two\n\+2\n three/);
  assert.match(shown, /Binary files differ \(6 bytes -> 8 bytes\)/);
  assert.ok(!shown.includes('\x1b['), 'no colour off a terminal');
  assert.equal(await cli('session', 'files', 'h1', 'a.txt', '--version', '1'), 'one\ntwo\nthree\n');
  assert.match(await cli('session', 'files', 'h1', '--version', '1'), /b\.txt/);

  for (let i = 3; i <= 4; i++) await send(`echo ${i} >> log.txt`);
  let chain = await host.store.getWorkspaceChain('h1');
  for (let i = 0; i < 100 && !chain.entries.some((e) => e.kind === 'snapshot'); i++) {
    await new Promise((r) => setTimeout(r, 100));
    chain = await host.store.getWorkspaceChain('h1');
  }
  const snapshot = chain.entries.find((e) => e.kind === 'snapshot');
  assert.ok(snapshot, `a snapshot once 3 layers followed: ${JSON.stringify(chain.entries)}`);
  await assert.rejects(
    berth.sessions.files('h1', { version: 1 }),
    (e) =>
      isBerthError(e, 'VERSION_NOT_RETAINED') &&
      e.message.includes(`versions ${snapshot.version}-${chain.version} are available`),
  );
  await assert.rejects(berth.sessions.diff('h1', 2), (e) => isBerthError(e, 'VERSION_NOT_RETAINED'));
  const log = await berth.sessions.files('h1', { path: 'log.txt', version: snapshot.version });
  const logged = Array.from({ length: snapshot.version - 2 }, (_, i) => `${i + 3}\n`).join('');
  assert.equal(
    log.type === 'file' && log.content.toString(),
    logged,
    'the snapshot version itself is readable',
  );
  const refused = await run(BIN, ['session', 'files', 'h1', '--version', '1'], { env }).catch((e) => e);
  assert.equal(refused.code, 2);
  assert.match(refused.stderr, /no longer retained .* available\. Fix: /);
});
