/**
 * The statements' headers are held to their SQL: every statement has one, it documents
 * exactly the :placeholders the SQL uses (for the dialect statements: the text of both
 * engines) and says what it returns; a statement marked @guard is run only through
 * `guarded` and every `guarded` call names a @guard statement, so a header cannot promise
 * an assertion the code does not make.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { POSTGRES_STATEMENTS } from '../postgres/statements.js';
import { SQLITE_STATEMENTS } from '../sqlite/statements.js';
import * as shared from './statements.js';

const SQL_DIR = join(import.meta.dirname, '..', '..', '..', '..', 'src', 'store', 'sql');

interface Header {
  name: string;
  params: string[];
  returns: boolean;
  guard: boolean;
}

/** The JSDoc block right above each `export const NAME =` (or `NAME: string;` in an interface). */
function headers(source: string, declaration: 'const' | 'member'): Header[] {
  const pattern =
    declaration === 'const'
      ? /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*export const (\w+) =/g
      : /\/\*\*((?:(?!\*\/)[\s\S])*)\*\/\s*(\w+): string;/g;
  return [...source.matchAll(pattern)].map(([, body = '', name = '']) => ({
    name,
    params: [...body.matchAll(/^\s*\*\s*@param (\w+)/gm)].map((m) => m[1]!),
    returns: /^\s*\*\s*@returns \S/m.test(body),
    guard: /^\s*\*\s*@guard \S/m.test(body),
  }));
}

function placeholders(sql: string): string[] {
  return [...new Set([...sql.matchAll(/(?<!:):([A-Za-z_]\w*)/g)].map((m) => m[1]!))].sort();
}

const statementFiles = readdirSync(join(SQL_DIR, 'statements')).filter((f) => f.endsWith('.ts'));
const sharedHeaders = statementFiles.flatMap((f) =>
  headers(readFileSync(join(SQL_DIR, 'statements', f), 'utf8'), 'const'),
);
const dialectSource = readFileSync(join(SQL_DIR, 'statements.ts'), 'utf8');
const dialectHeaders = headers(
  dialectSource.slice(dialectSource.indexOf('interface DialectStatements')),
  'member',
);

test('every shared statement has a header naming exactly its placeholders and what it returns', () => {
  const sql = shared as unknown as Record<string, string>;
  assert.deepEqual(
    sharedHeaders.map((h) => h.name).sort(),
    Object.keys(sql).sort(),
    'one header per statement',
  );
  const wrong: string[] = [];
  for (const h of sharedHeaders) {
    if ([...h.params].sort().join() !== placeholders(sql[h.name]!).join())
      wrong.push(
        `${h.name}: documents ${h.params.join(', ') || 'none'}, uses ${placeholders(sql[h.name]!).join(', ') || 'none'}`,
      );
    if (new Set(h.params).size !== h.params.length) wrong.push(`${h.name}: a parameter documented twice`);
    if (!h.returns) wrong.push(`${h.name}: no @returns`);
  }
  assert.deepEqual(wrong, []);
});

test('every dialect statement documents exactly the placeholders of both engines’ text', () => {
  const engines = { sqlite: SQLITE_STATEMENTS, postgres: POSTGRES_STATEMENTS } as const;
  assert.deepEqual(dialectHeaders.map((h) => h.name).sort(), Object.keys(SQLITE_STATEMENTS).sort());
  const wrong: string[] = [];
  for (const h of dialectHeaders) {
    if (!h.returns) wrong.push(`${h.name}: no @returns`);
    for (const [engine, texts] of Object.entries(engines)) {
      const used = placeholders(texts[h.name as keyof typeof texts]);
      if ([...h.params].sort().join() !== used.join())
        wrong.push(`${h.name} (${engine}): documents ${h.params.join(', ')}, uses ${used.join(', ')}`);
    }
  }
  assert.deepEqual(wrong, []);
});

test('a @guard statement is run only through guarded(), and guarded() runs only @guard statements', () => {
  const guards = new Set(sharedHeaders.filter((h) => h.guard).map((h) => h.name));
  const programs = readdirSync(join(SQL_DIR, 'programs'))
    .filter((f) => f.endsWith('.ts'))
    .map((f) => ({ f, text: readFileSync(join(SQL_DIR, 'programs', f), 'utf8') }));
  const wrong: string[] = [];
  const guardedSomewhere = new Set<string>();
  for (const { f, text } of programs) {
    for (const [, name] of text.matchAll(/\brun\('(\w+)'/g))
      if (guards.has(name!)) wrong.push(`${f}: runs the guarded ${name} without guarded()`);
    for (const [, name] of text.matchAll(/\bguarded\(\s*tx,\s*'(\w+)'/g)) {
      if (!guards.has(name!)) wrong.push(`${f}: guarded() runs ${name}, whose header has no @guard`);
      guardedSomewhere.add(name!);
    }
  }
  for (const name of guards)
    if (!guardedSomewhere.has(name)) wrong.push(`${name}: @guard, but no program runs it`);
  assert.deepEqual(wrong, []);
  assert.ok(guards.size > 0);
});
