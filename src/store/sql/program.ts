/**
 * A store transition written once for every SQL engine: a generator that yields the
 * statements it needs (by name, with named parameters) and receives their results. A
 * driver runs it inside one transaction: the SQLite driver synchronously (better-sqlite3
 * cannot span a transaction across awaits), the PostgreSQL driver over the network, and
 * again from the start when PostgreSQL asks for a retry. A program therefore keeps no
 * effect outside the rows it writes and the notifications it collects.
 */
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
