/**
 * The docs name files and constants that exist. README.md and docs/*.md are read as text:
 * every repository path in them (src/…, test/…, scripts/…) must exist, every bare test or
 * source file name must name a file somewhere in the tree, and a constant named right
 * after a path (`src/x.ts (`NAME`)`) must appear in that file. A moved or renamed file
 * fails here instead of leaving a doc pointing at nothing.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { test } from 'node:test';

const REPO = join(import.meta.dirname, '..', '..');
const TOP = ['src', 'test', 'scripts', 'bench', 'deploy', 'docs', 'image', 'dashboard'];

function docs(): { name: string; text: string }[] {
  const dir = join(REPO, 'docs');
  return [
    { name: 'README.md', text: readFileSync(join(REPO, 'README.md'), 'utf8') },
    ...readdirSync(dir)
      .filter((n) => n.endsWith('.md'))
      .map((n) => ({ name: `docs/${n}`, text: readFileSync(join(dir, n), 'utf8') })),
  ];
}

function treeFileNames(): Set<string> {
  const names = new Set<string>();
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else names.add(name);
    }
  };
  for (const top of TOP) if (existsSync(join(REPO, top))) walk(join(REPO, top));
  return names;
}

// A path starts at a top-level folder that is not the tail of another path (dist/bench/… is a build output).
const PATH = new RegExp(`(?<![\\w./-])((?:${TOP.join('|')})/[\\w./-]*[\\w-])`, 'g');
const PATH_THEN_NAME = new RegExp(
  `(?<![\\w./-])((?:${TOP.join('|')})/[\\w./-]*\\.\\w+) \\(\`(\\w+)\`\\)`,
  'g',
);
const FILE_NAME = /(?<![\w./-])([\w-]+(?:\.[\w-]+)*\.(?:test\.ts|ts|sh|mjs|sql))\b/g;

test('every path the docs name exists', () => {
  const missing: string[] = [];
  for (const doc of docs())
    for (const [, path] of doc.text.matchAll(PATH))
      if (!existsSync(join(REPO, path!))) missing.push(`${doc.name}: ${path}`);
  assert.deepEqual(missing, []);
});

test('every file name the docs mention is in the tree', () => {
  const names = treeFileNames();
  const missing: string[] = [];
  for (const doc of docs())
    for (const [, name] of doc.text.matchAll(FILE_NAME))
      if (!names.has(name!) && !name!.includes('/')) missing.push(`${doc.name}: ${name}`);
  assert.deepEqual(missing, []);
});

test('a constant named after a path is in that file', () => {
  const wrong: string[] = [];
  for (const doc of docs())
    for (const [, path, name] of doc.text.matchAll(PATH_THEN_NAME)) {
      const file = join(REPO, path!);
      if (existsSync(file) && !readFileSync(file, 'utf8').includes(name!))
        wrong.push(`${doc.name}: ${name} is not in ${relative(REPO, file)}`);
    }
  assert.deepEqual(wrong, []);
});
