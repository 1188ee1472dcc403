/**
 * The counts the store keeps of its sessions, messages and turns (table session_counts,
 * one row per tenant and shard), so status and metrics read a few rows instead of every
 * session. Triggers keep them, in the transaction of the change that moves them: every
 * path that inserts, updates or deletes a session, an inbound message or a turn is
 * counted, whichever program runs it, so no transition can forget to. Each change adds
 * the new row's flags and takes away the old row's.
 *
 * PostgreSQL spreads each tenant over SHARDS rows (by a hash of the session id): a
 * counted change locks its row until its commit, and one row per tenant would make every
 * claim and commit of the tenant wait for the one before. SQLite has one writer: one
 * shard. A reader sums the shards.
 */

/** Rows per tenant on PostgreSQL (a power of two: the shard is the hash's low bits). */
const SHARDS = 8;

/** Every count column, as the migration creates it. */
export const COUNT_COLUMNS = [
  'sessions',
  'archived',
  'held',
  'leased',
  'bound',
  'waiting',
  'running_turns',
  'pending',
  'processing',
  'failed',
] as const;
export type CountColumn = (typeof COUNT_COLUMNS)[number];

type Engine = 'sqlite' | 'postgres';

/** One counted table: what each of its rows adds to which counts. */
interface Counted {
  table: 'sessions' | 'messages' | 'turns';
  /** The session of a row (`r` = NEW, OLD or the table's alias). */
  sessionId: (r: string) => string;
  tenant: (r: string) => string;
  /** The conditions, each counted as 1 when true. */
  adds: Partial<Record<CountColumn, (r: string) => string>>;
  /** The columns whose change can move a count: other updates fire nothing. */
  watched: string[];
  /** Rows outside it count nothing (and fire nothing). */
  only?: (r: string) => string;
}

const tenantOfSession = (r: string) => `(SELECT tenant FROM sessions WHERE id = ${r}.session_id)`;

const COUNTED: Counted[] = [
  {
    table: 'sessions',
    sessionId: (r) => `${r}.id`,
    tenant: (r) => `${r}.tenant`,
    adds: {
      sessions: () => '1 = 1',
      archived: (r) => `${r}.archived_at IS NOT NULL`,
      held: (r) => `${r}.held_at IS NOT NULL`,
      leased: (r) => `${r}.lease_owner IS NOT NULL`,
      bound: (r) => `${r}.sandbox IS NOT NULL`,
      waiting: (r) => `${r}.queued_id IS NOT NULL`,
    },
    watched: ['tenant', 'archived_at', 'held_at', 'lease_owner', 'sandbox', 'queued_id'],
  },
  {
    table: 'messages',
    sessionId: (r) => `${r}.session_id`,
    tenant: tenantOfSession,
    adds: {
      pending: (r) => `${r}.status = 'pending'`,
      processing: (r) => `${r}.status = 'processing'`,
      failed: (r) => `${r}.status = 'failed'`,
    },
    watched: ['status', 'session_id'],
    only: (r) => `${r}.direction = 'in'`,
  },
  {
    table: 'turns',
    sessionId: (r) => `${r}.session_id`,
    tenant: tenantOfSession,
    adds: { running_turns: (r) => `${r}.status = 'running'` },
    watched: ['status', 'session_id'],
  },
];

function shardOf(engine: Engine, sessionId: string): string {
  return engine === 'postgres' ? `(hashtext(${sessionId}) & ${SHARDS - 1})` : '0';
}

/** Adds `sign` × the flags of the rows `source` yields (tenant, shard, then one value per column). */
function upsert(columns: CountColumn[], source: string): string {
  return `INSERT INTO session_counts (tenant, shard, ${columns.join(', ')}) ${source}
ON CONFLICT (tenant, shard) DO UPDATE SET ${columns.map((c) => `${c} = session_counts.${c} + excluded.${c}`).join(', ')}`;
}

/** A row outside `only` counts nothing: an update across it adds or takes away on one side alone. */
function flags(c: Counted, r: string, sign: 1 | -1): string[] {
  const only = c.only ? `${c.only(r)} AND ` : '';
  return Object.values(c.adds).map((cond) => `${sign} * (CASE WHEN ${only}${cond(r)} THEN 1 ELSE 0 END)`);
}

function columnsOf(c: Counted): CountColumn[] {
  return Object.keys(c.adds) as CountColumn[];
}

/** One row's flags, added (NEW) or taken away (OLD). */
function change(engine: Engine, c: Counted, r: 'NEW' | 'OLD'): string {
  const values = [c.tenant(r), shardOf(engine, c.sessionId(r)), ...flags(c, r, r === 'NEW' ? 1 : -1)];
  return upsert(columnsOf(c), `VALUES (${values.join(', ')})`);
}

/**
 * The counts of what is already stored: run when the triggers are made, and by a bulk load
 * that ran with the triggers off (one upsert per row of one long transaction piles up
 * versions of the same few rows on PostgreSQL; the benchmarks' seeds).
 */
export function recountSessionCounts(engine: Engine): string {
  return ['DELETE FROM session_counts;', ...COUNTED.map((c) => backfill(engine, c))].join('\n');
}

function backfill(engine: Engine, c: Counted): string {
  const sums = flags(c, 't', 1).map((f) => `SUM(${f})`);
  return `${upsert(
    columnsOf(c),
    `SELECT ${c.tenant('t')}, ${shardOf(engine, c.sessionId('t'))}, ${sums.join(', ')} FROM ${c.table} t WHERE 1 = 1 GROUP BY 1, 2`,
  )};`;
}

function changedWhen(engine: Engine, c: Counted): string {
  const distinct = engine === 'postgres' ? 'IS DISTINCT FROM' : 'IS NOT';
  const moved = c.watched.map((col) => `OLD.${col} ${distinct} NEW.${col}`).join(' OR ');
  return c.only ? `(${c.only('NEW')} OR ${c.only('OLD')}) AND (${moved})` : moved;
}

function sqliteTriggers(c: Counted): string {
  const name = `session_counts_${c.table}`;
  const when = (r: 'NEW' | 'OLD') => (c.only ? ` WHEN ${c.only(r)}` : '');
  return `
CREATE TRIGGER ${name}_insert AFTER INSERT ON ${c.table}${when('NEW')} BEGIN ${change('sqlite', c, 'NEW')}; END;
CREATE TRIGGER ${name}_delete AFTER DELETE ON ${c.table}${when('OLD')} BEGIN ${change('sqlite', c, 'OLD')}; END;
CREATE TRIGGER ${name}_update AFTER UPDATE OF ${c.watched.join(', ')} ON ${c.table} WHEN ${changedWhen('sqlite', c)}
BEGIN ${change('sqlite', c, 'OLD')}; ${change('sqlite', c, 'NEW')}; END;`;
}

function postgresTriggers(c: Counted): string {
  const name = `session_counts_${c.table}`;
  const when = (r: 'NEW' | 'OLD') => (c.only ? ` WHEN (${c.only(r)})` : '');
  return `
CREATE FUNCTION ${name}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN ${change('postgres', c, 'OLD')}; END IF;
  IF TG_OP <> 'DELETE' THEN ${change('postgres', c, 'NEW')}; END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER ${name}_insert AFTER INSERT ON ${c.table} FOR EACH ROW${when('NEW')} EXECUTE FUNCTION ${name}();
CREATE TRIGGER ${name}_delete AFTER DELETE ON ${c.table} FOR EACH ROW${when('OLD')} EXECUTE FUNCTION ${name}();
CREATE TRIGGER ${name}_update AFTER UPDATE OF ${c.watched.join(', ')} ON ${c.table} FOR EACH ROW WHEN (${changedWhen('postgres', c)}) EXECUTE FUNCTION ${name}();`;
}

/** Migration 25's text for one engine: the table, what is stored counted, and the triggers. */
export function sessionCountsDdl(engine: Engine): string {
  const table = `
CREATE TABLE session_counts (
  tenant TEXT NOT NULL,
  shard INTEGER NOT NULL,
${COUNT_COLUMNS.map((c) => `  ${c} INTEGER NOT NULL DEFAULT 0,`).join('\n')}
  PRIMARY KEY (tenant, shard)
);`;
  const triggers = COUNTED.map((c) => (engine === 'postgres' ? postgresTriggers(c) : sqliteTriggers(c)));
  return [table, ...COUNTED.map((c) => backfill(engine, c)), ...triggers].join('\n');
}
