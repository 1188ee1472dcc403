/** The line diff: hand-made cases, and random edits checked against diff(1) and by replaying the script. */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { type DiffLine, diffLines, splitLines, unifiedDiff } from './line-diff.js';

const CASES: { name: string; before: string; after: string; diff: string }[] = [
  { name: 'equal texts', before: 'a\nb\n', after: 'a\nb\n', diff: '' },
  { name: 'a new file', before: '', after: 'one\ntwo\n', diff: '@@ -0,0 +1,2 @@\n+one\n+two\n' },
  { name: 'a file emptied', before: 'one\n', after: '', diff: '@@ -1 +0,0 @@\n-one\n' },
  {
    name: 'one line changed in the middle',
    before: '1\n2\n3\n4\n5\n6\n7\n8\n9\n',
    after: '1\n2\n3\n4\nfive\n6\n7\n8\n9\n',
    diff: '@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n',
  },
  {
    name: 'a newline added at the end',
    before: 'a\nb',
    after: 'a\nb\n',
    diff: '@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n',
  },
  {
    name: 'two changes far apart make two hunks',
    before: `${Array.from({ length: 20 }, (_, i) => `l${i}`).join('\n')}\n`,
    after: `${Array.from({ length: 20 }, (_, i) => (i === 1 || i === 18 ? `L${i}` : `l${i}`)).join('\n')}\n`,
    diff:
      '@@ -1,5 +1,5 @@\n l0\n-l1\n+L1\n l2\n l3\n l4\n' +
      '@@ -16,5 +16,5 @@\n l15\n l16\n l17\n-l18\n+L18\n l19\n',
  },
];

for (const c of CASES)
  test(`unifiedDiff: ${c.name}`, () => {
    assert.equal(unifiedDiff(c.before, c.after), c.diff);
  });

/** The new text, from the old one and the script: what `patch` would make of it. */
function replay(script: DiffLine[]): { before: string[]; after: string[] } {
  return {
    before: script.filter((l) => l.op !== '+').map((l) => l.text),
    after: script.filter((l) => l.op !== '-').map((l) => l.text),
  };
}

/** A small deterministic generator (no flaky seeds). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function mutate(lines: string[], next: () => number): string[] {
  const out: string[] = [];
  for (const line of lines) {
    const r = next();
    if (r < 0.15) continue;
    if (r < 0.3) out.push(`changed ${line}`);
    else out.push(line);
    if (next() < 0.1) out.push(`new ${Math.floor(next() * 5)}`);
  }
  return out;
}

test('random edits: the script replays both texts and is as short as diff(1) finds', () => {
  const dir = mkdtempSync(join(tmpdir(), 'berth-line-diff-'));
  try {
    const next = rng(42);
    for (let round = 0; round < 60; round++) {
      const before = Array.from({ length: Math.floor(next() * 40) }, () => `x${Math.floor(next() * 6)}`);
      const after = mutate(before, next);
      const script = diffLines(before, after);
      assert.deepEqual(replay(script), { before, after }, `round ${round}`);
      const beforeText = before.map((l) => `${l}\n`).join('');
      const afterText = after.map((l) => `${l}\n`).join('');
      writeFileSync(join(dir, 'a'), beforeText);
      writeFileSync(join(dir, 'b'), afterText);
      let expected = '';
      try {
        execFileSync('diff', ['-u', join(dir, 'a'), join(dir, 'b')], { encoding: 'utf8' });
      } catch (err) {
        expected = String((err as { stdout: string }).stdout);
      }
      const changes = (text: string) =>
        text.split('\n').filter((l) => /^[-+]/.test(l) && !/^(---|\+\+\+) /.test(l)).length;
      assert.equal(changes(unifiedDiff(beforeText, afterText)), changes(expected), `round ${round}`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('past maxEdits the middle is one replaced block: still a correct diff', () => {
  const before = Array.from({ length: 3000 }, (_, i) => `old ${i}`);
  const after = ['head', ...Array.from({ length: 3000 }, (_, i) => `new ${i}`)];
  const script = diffLines(before, after, 50);
  assert.deepEqual(replay(script), { before, after });
  assert.equal(script.filter((l) => l.op === '-').length, 3000);
});

test('splitLines keeps whether the text ended with a newline', () => {
  assert.deepEqual(splitLines('a\nb'), { lines: ['a', 'b'], endsWithNewline: false });
  assert.deepEqual(splitLines('a\n'), { lines: ['a'], endsWithNewline: true });
  assert.deepEqual(splitLines(''), { lines: [], endsWithNewline: true });
});
