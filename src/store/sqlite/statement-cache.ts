/** Prepared statements of one SQLite connection, prepared once per SQL text and reused. */
import type Database from 'better-sqlite3';
import type { Row } from '../sql/program.js';

export class StatementCache {
  private readonly statements = new Map<string, Database.Statement>();

  constructor(private readonly db: Database.Database) {}

  run(text: string, params: Row): Database.RunResult {
    return this.stmt(text).run(params);
  }

  get(text: string, params: Row): Row | undefined {
    return this.stmt(text).get(params) as Row | undefined;
  }

  all(text: string, params: Row): Row[] {
    return this.stmt(text).all(params) as Row[];
  }

  private stmt(text: string): Database.Statement {
    let s = this.statements.get(text);
    if (!s) {
      s = this.db.prepare(text);
      this.statements.set(text, s);
    }
    return s;
  }
}
