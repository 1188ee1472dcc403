/**
 * The shared statements use named parameters (:name); PostgreSQL takes positional ones
 * ($1). Each name becomes one position, in order of first use, so a name used twice is
 * sent once.
 */
import type { Row } from '../sql/program.js';

export interface PositionalStatement {
  text: string;
  names: string[];
}

/** `::type` casts are left alone. */
export function toPositional(text: string): PositionalStatement {
  const names: string[] = [];
  const converted = text.replace(/(?<!:):([A-Za-z_][A-Za-z0-9_]*)/g, (_, name: string) => {
    let index = names.indexOf(name);
    if (index === -1) index = names.push(name) - 1;
    return `$${index + 1}`;
  });
  return { text: converted, names };
}

/** Throws when the statement names a parameter the caller did not give: a bug, caught by the conformance suite. */
export function positionalValues(statement: PositionalStatement, params: Row): unknown[] {
  return statement.names.map((name) => {
    if (!(name in params)) throw new Error(`Missing SQL parameter :${name}`);
    return params[name];
  });
}
