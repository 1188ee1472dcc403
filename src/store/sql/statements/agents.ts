/**
 * The statements on `agents`. Written once for both engines (../statements.ts says in
 * which dialect). Each header lists the statement's parameters and what it returns; a
 * guarded one (@guard) must change exactly one row, and says why nothing else can happen
 * (statements.test.ts holds the headers to the SQL and the guards to their callers).
 */

import { afterKey } from '../keyset.js';

/**
 * A new agent; a deleted agent's name can be taken again.
 * @param name the agent
 * @param spec its resolved spec, JSON
 * @param tenant its owner
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = created, 0 = a live agent has the name (AGENT_EXISTS)
 */
export const INSERT_AGENT = `
INSERT INTO agents (name, spec, tenant, created_at) VALUES (:name, :spec, :tenant, :now)
ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, tenant = excluded.tenant, created_at = excluded.created_at, deleted_at = NULL
WHERE agents.deleted_at IS NOT NULL`;

/**
 * A live (not deleted) agent.
 * @param name the agent
 * @returns the row, or none
 */
export const AGENT_BY_NAME = `SELECT * FROM agents WHERE name = :name AND deleted_at IS NULL`;

/**
 * A page of a tenant's live agents, by name (a live name is unique).
 * @param tenant null = every tenant
 * @param after name of the previous page's last row (null: the first page)
 * @param limit at most this many
 * @returns rows
 */
export const ALL_AGENTS = `
SELECT * FROM agents WHERE deleted_at IS NULL AND (CAST(:tenant AS TEXT) IS NULL OR tenant = :tenant)
  AND ${afterKey('name', 'TEXT')}`;

/**
 * A live agent's new spec (its name stays).
 * @param name the agent
 * @param spec JSON
 * @returns changed rows: 1 = replaced, 0 = it was deleted since the caller read it (a
 *   concurrent deleteAgent on PostgreSQL, whose rows it does not lock): AGENT_NOT_FOUND
 */
export const REPLACE_AGENT_SPEC = `UPDATE agents SET spec = :spec WHERE name = :name AND deleted_at IS NULL`;

/**
 * Soft delete: the row stays for the archived sessions that name it.
 * @param name the agent
 * @param now the transition's time, epoch ms
 * @returns changed rows: 1 = deleted, 0 = a concurrent deleteAgent came first (PostgreSQL):
 *   AGENT_NOT_FOUND
 */
export const DELETE_AGENT = `UPDATE agents SET deleted_at = :now WHERE name = :name AND deleted_at IS NULL`;
