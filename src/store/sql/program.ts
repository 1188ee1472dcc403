/**
 * A store transition written once for every SQL engine: a generator that yields the
 * statements it needs (by name, with named parameters) and receives their results. A
 * driver runs it inside one transaction: the SQLite driver synchronously (better-sqlite3
 * cannot span a transaction across awaits), the PostgreSQL driver over the network, and
 * again from the start when PostgreSQL asks for a retry. A program therefore keeps no
 * effect outside the rows it writes and the notifications it collects.
 */
import { BerthError } from '../../core/index.js';
import type { StoreChange } from '../store.js';
import type * as shared from './statements.js';
import type { DialectStatements } from './statements.js';

export type StatementName = Exclude<keyof typeof shared, 'DialectStatements'> | keyof DialectStatements;

export type Row = Record<string, unknown>;

export type Op =
  | { kind: 'get'; statement: StatementName; params: Row }
  | { kind: 'all'; statement: StatementName; params: Row }
  | { kind: 'run'; statement: StatementName; params: Row };

/** What the driver sends back for each Op: a row or undefined, rows, or the count of changed rows. */
export type OpResult = Row | undefined | Row[] | number;

export type Program<T> = Generator<Op, T, OpResult>;

/** What a write program runs with: where it collects its notifications, and the Store method it serves (named in its errors). */
export interface Tx {
  readonly changes: StoreChange[];
  readonly operation: string;
}

/** The first row, or undefined. */
export function* get(statement: StatementName, params: Row): Program<Row | undefined> {
  return (yield { kind: 'get', statement, params }) as Row | undefined;
}

export function* all(statement: StatementName, params: Row): Program<Row[]> {
  return (yield { kind: 'all', statement, params }) as Row[];
}

/** Rows changed. */
export function* run(statement: StatementName, params: Row): Program<number> {
  return (yield { kind: 'run', statement, params }) as number;
}

/**
 * The row a guarded statement must change, to say what it found when it did not: the
 * entity ("Turn t1") and the state the guard requires ("running"), re-read by `reread`
 * with `key`, showing `columns` of what it found.
 */
export interface Guard {
  entity: string;
  expected: string;
  reread: StatementName;
  key: Row;
  columns: string[];
}

/**
 * Runs a guarded statement (@guard in its header): one that must change exactly one row,
 * because the transition read that row in the required state under its lock. Any other
 * count is a bug, never a race: an INTERNAL error naming what the row holds now, and the
 * transaction rolls back.
 */
export function* guarded(tx: Tx, statement: StatementName, params: Row, guard: Guard): Program<void> {
  const changed = yield* run(statement, params);
  if (changed === 1) return;
  const row = yield* get(guard.reread, guard.key);
  const found = row
    ? JSON.stringify(Object.fromEntries(guard.columns.map((c) => [c, row[c] ?? null])))
    : 'no row';
  throw new BerthError(
    'INTERNAL',
    `${guard.entity} is not ${guard.expected} (${tx.operation}): ${statement} changed ${changed} rows; found ${found}`,
  );
}

export function runProgramSync<T>(program: Program<T>, execute: (op: Op) => OpResult): T {
  let step = program.next();
  while (!step.done) step = program.next(execute(step.value));
  return step.value;
}

export async function runProgram<T>(program: Program<T>, execute: (op: Op) => Promise<OpResult>): Promise<T> {
  let step = program.next();
  while (!step.done) step = program.next(await execute(step.value));
  return step.value;
}
