/** Agents, and the tenancy rule every aggregate applies: another tenant's rows look absent. */
import { type Agent, type AgentSpec, BerthError, BY_NAME, type PageRequest } from '../../../core/index.js';
import { pageParams } from '../keyset.js';
import { all, get, type Program, type Row, run } from '../program.js';
import { toAgent } from '../rows.js';

export function* createAgent(spec: AgentSpec, now: number, tenant: string): Program<Agent> {
  const params = { name: spec.name, spec: JSON.stringify(spec), tenant, now };
  // Names are global; another tenant's agent is not revealed beyond "taken".
  if ((yield* run('INSERT_AGENT', params)) !== 1)
    throw new BerthError('AGENT_EXISTS', `Agent ${spec.name} already exists (createAgent)`);
  // Its sessions' claims are shared with other tenants' from now on (FAIR_QUEUE reads this row).
  yield* run('ENSURE_TENANT_SHARE', { tenant });
  return { ...spec, tenant, createdAt: now };
}

export function* getAgent(name: string, tenant: string | undefined): Program<Agent | null> {
  const row = yield* get('AGENT_BY_NAME', { name });
  return row && ownedBy(row, tenant) ? toAgent(row) : null;
}

export function* listAgents(tenant: string | undefined, page?: PageRequest): Program<Agent[]> {
  return (yield* all('ALL_AGENTS', { tenant: tenant ?? null, ...pageParams(BY_NAME, page) })).map(toAgent);
}

export function* replaceAgentSpec(spec: AgentSpec, tenant: string | undefined): Program<Agent> {
  const row = yield* ownAgentRow(spec.name, tenant, 'replaceAgentSpec');
  if ((yield* run('REPLACE_AGENT_SPEC', { name: spec.name, spec: JSON.stringify(spec) })) !== 1)
    throw agentNotFound(spec.name, 'replaceAgentSpec');
  return { ...spec, tenant: String(row.tenant), createdAt: Number(row.created_at) };
}

export function* deleteAgent(name: string, now: number, tenant: string | undefined): Program<void> {
  yield* ownAgentRow(name, tenant, 'deleteAgent');
  if (yield* get('LIVE_SESSION_OF_AGENT', { agent: name }))
    throw new BerthError('AGENT_IN_USE', `Agent ${name} has sessions that are not archived (deleteAgent)`);
  if ((yield* run('DELETE_AGENT', { name, now })) !== 1) throw agentNotFound(name, 'deleteAgent');
  yield* run('DELETE_STORAGE_GRANTS_OF_AGENT', { agent: name });
  yield* run('DELETE_STORAGE_OBJECTS_OF_AGENT', { agent: name });
}

/** The live agent `name` if `tenant` may use it; otherwise AGENT_NOT_FOUND (another tenant's looks absent). */
export function* ownAgentRow(name: string, tenant: string | undefined, operation: string): Program<Row> {
  const row = yield* get('AGENT_BY_NAME', { name });
  if (!row || !ownedBy(row, tenant)) throw agentNotFound(name, operation);
  return row;
}

/** A row with a tenant column is visible to that tenant and to the operator (tenant undefined). */
export function ownedBy(row: Row, tenant: string | undefined): boolean {
  return tenant === undefined || row.tenant === tenant;
}

function agentNotFound(name: string, operation: string): BerthError {
  return new BerthError('AGENT_NOT_FOUND', `Agent ${name} does not exist (${operation})`);
}
