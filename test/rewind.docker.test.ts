/**
 * Rewind and fork from a version through a real host (real Docker, SQLite, file blobs): a
 * `command` agent writes files and a transcript under `.berth/` over turns, a snapshot
 * compacts the chain, and the session is rewound (to the snapshot's version, then across
 * the rewind's own snapshot to a later one) and forked from an older version. Each next
 * turn runs on the rewound files, in the sandbox, on the worker that held the newer copy:
 * it `ls`es and `cat`s and sees the old tree, transcript included. A version the
 * compaction dropped is refused, naming those still kept; a rewind while a message waits
 * is refused with SESSION_BUSY.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { Berth } from '../src/client/index.js';
import { isBerthError, type WorkspaceChain } from '../src/core/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';

const run = promisify(execFile);
const BIN = new URL('../../bin/berth', import.meta.url).pathname;

/** What a turn prints: the workspace's names and every file's content, the transcript included. */
const LOOK = 'ls -A; echo ---; for f in *.txt .berth/transcript; do echo "$f: $(cat $f)"; done';

/** The same, for a tree given as `{path: content}` (what LOOK prints on it). */
function looked(files: Record<string, string>): string {
  const names = [...new Set(Object.keys(files).map((p) => p.split('/')[0]!))].sort();
  const txt = Object.keys(files)
    .filter((p) => p.endsWith('.txt') && !p.includes('/'))
    .sort();
  const lines = [...txt, '.berth/transcript'].map((p) => `${p}: ${(files[p] ?? '').trimEnd()}`);
  return `${names.join('\n')}\n---\n${lines.join('\n')}\n`;
}

test('rewind: the next turn runs on the old tree (across a snapshot), history kept; fork --from; refusals', async (t) => {
  // A snapshot once 3 layers follow the newest one.
  const { host } = await startTestHost(t, { BERTH_SNAPSHOT_LAYERS: '3' });
  const admin = new Berth({ url: host.url, token: host.adminToken });
  const { token } = await admin.tokens.create({ tenant: 'rew' });
  const berth = new Berth({ url: host.url, token });
  await berth.agents.create({ name: 'rew-sh', provider: 'command' });
  const send = async (session: string, text: string) => {
    const reply = await berth.sessions.send(session, text, { agent: 'rew-sh' });
    await waitPromoted(host, session);
    return reply.text;
  };

  // Five turns, each changing the files and appending to the transcript; the trees kept here.
  const trees: Record<string, string>[] = [{}];
  // Each turn: its command, the files it writes, the files it removes.
  const turns: [string, Record<string, string>, string[]][] = [
    ['echo one > a.txt', { 'a.txt': 'one\n' }, []],
    ['echo two > a.txt; echo bee > b.txt', { 'a.txt': 'two\n', 'b.txt': 'bee\n' }, []],
    ['rm a.txt; echo sea > c.txt', { 'c.txt': 'sea\n' }, ['a.txt']],
    ['echo dee > d.txt; echo bee2 > b.txt', { 'd.txt': 'dee\n', 'b.txt': 'bee2\n' }, []],
    ['rm b.txt c.txt; echo five > a.txt', { 'a.txt': 'five\n' }, ['b.txt', 'c.txt']],
  ];
  for (const [i, [command, written, removed]] of turns.entries()) {
    await send('r1', `mkdir -p .berth; echo t${i + 1} >> .berth/transcript; ${command}`);
    const tree = { ...trees.at(-1)!, ...written };
    for (const path of removed) delete tree[path];
    tree['.berth/transcript'] = `${tree['.berth/transcript'] ?? ''}t${i + 1}\n`;
    trees.push(tree);
  }
  // The snapshot, and the rows it supersedes dropped (the compaction records one, then the other).
  const compacted = (c: WorkspaceChain) => {
    const snapshot = c.entries.find((e) => e.kind === 'snapshot');
    return snapshot !== undefined && (c.history ?? c.entries).every((e) => e.version >= snapshot.version);
  };
  let chain = await host.store.getWorkspaceChain('r1');
  for (let i = 0; i < 100 && !compacted(chain); i++) {
    await new Promise((r) => setTimeout(r, 100));
    chain = await host.store.getWorkspaceChain('r1');
  }
  const snapshot = chain.entries.find((e) => e.kind === 'snapshot');
  assert.ok(snapshot, `a snapshot once 3 layers followed: ${JSON.stringify(chain.entries)}`);
  const S = snapshot.version;
  assert.equal(chain.version, 5);
  const objectsBefore = await host.store.getWorkspaceChain('r1');
  const keysBefore = new Set((objectsBefore.history ?? objectsBefore.entries).map((e) => e.key));

  assert.notEqual(looked(trees[S]!), looked(trees[5]!), 'the trees the test tells apart differ');
  // Rewind to the snapshot's version: the next turn, on the worker that holds version 5, sees S's tree.
  const first = await berth.sessions.rewind('r1', S);
  assert.deepEqual([first.version, first.toVersion, first.objects], [6, S, 1]);
  const afterRewind = await host.store.getWorkspaceChain('r1');
  const named = (afterRewind.history ?? afterRewind.entries).filter((e) => e.version === 6);
  assert.ok(
    named.every((e) => keysBefore.has(e.key)),
    'the rewind names objects the chain held: no byte copied',
  );
  assert.equal(await send('r1', LOOK), looked(trees[S]!));
  trees.push({ ...trees[S]! }); // version 7: that turn changed nothing

  // Rewind to version 5, behind the rewind's own snapshot: 5's tree, transcript included.
  const second = await berth.sessions.rewind('r1', 5);
  assert.deepEqual([second.version, second.toVersion], [8, 5]);
  assert.equal(await send('r1', LOOK), looked(trees[5]!));
  // The history of every version since the compaction is still readable.
  const old = await berth.sessions.files('r1', { version: S, path: '.berth/transcript' });
  assert.equal(old.type === 'file' && old.content.toString(), trees[S]!['.berth/transcript']);

  // Refused: a version the compaction dropped (naming what is kept); a rewind while a message waits.
  const refusal = await berth.sessions.rewind('r1', S - 1).then(
    (r) => r,
    (e: unknown) => e,
  );
  assert.ok(
    isBerthError(refusal, 'VERSION_NOT_RETAINED') &&
      refusal.message.includes(`versions ${S}-9 are available`),
    `version ${S - 1} refused, as compacted into ${S}: got ${JSON.stringify(refusal)} from ${JSON.stringify(await host.store.getWorkspaceChain('r1'))}`,
  );

  // The CLI: fork from version S, and the fork's first turn sees S's tree; rewind by the CLI.
  const env = { ...process.env, BERTH_URL: host.url, BERTH_TOKEN: token, NO_COLOR: '1' };
  const cli = async (...args: string[]) => (await run(BIN, args, { env })).stdout;
  assert.match(
    await cli('session', 'fork', 'r1', 'r2', '--from', String(S)),
    /forked from r1 at workspace version/,
  );
  assert.equal(await send('r2', LOOK), looked(trees[S]!));
  assert.match(
    await cli('session', 'rewind', 'r1', '--to', String(S + 1)),
    new RegExp(`rewound to version ${S + 1}: now at version 10`),
  );
  assert.equal(await send('r1', LOOK), looked(trees[S + 1]!));
  await assert.rejects(cli('session', 'rewind', 'r1', '--to', String(S - 1)), (e: { stderr?: string }) =>
    /VERSION_NOT_RETAINED|no longer retained/.test(String(e.stderr)),
  );
  assert.match(
    await cli('session', 'history', 'r1'),
    new RegExp(
      `workspace: version 11, versions ${S}-11 retained \\(retention: since the newest snapshot\\); \\d+ objects, .* in the blob store\\nversion 6: rewound to version ${S}\\nversion 8: rewound to version 5\\nversion 10: rewound to version ${S + 1}\\n$`,
    ),
  );
  await berth.sessions.post('r1', { text: 'sleep 3' });
  await assert.rejects(berth.sessions.rewind('r1', 5), (e) => isBerthError(e, 'SESSION_BUSY'));
  await assert.rejects(cli('session', 'rewind', 'r1', '--to', '5'), (e: { stderr?: string }) =>
    /SESSION_BUSY|answering its messages/.test(String(e.stderr)),
  );
});
