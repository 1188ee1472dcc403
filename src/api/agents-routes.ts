/** /v1/agents: create, apply (create or replace whole), list, get, update, delete — each tenant its own agents. */
import type { FastifyPluginAsync } from 'fastify';
import {
  AGENT_CONFIG_MOUNT,
  type AgentSpec,
  agentPatchSchema,
  agentSpecOf,
  agentSpecSchema,
  assertAgentCrossFields,
  BerthError,
  BY_NAME,
  cursorPageQuerySchema,
  diffAgentSpecs,
  nextCursor,
  parseAgentSpec,
} from '../core/index.js';
import { resolveMounts } from '../mount-policy/index.js';
import type { PluginDeps } from './deps.js';
import { PAGED, scopeOf } from './route-table.js';
import { parseInput } from './validate.js';

const tag = 'agents';

export const agentsRoutes: FastifyPluginAsync<PluginDeps> = async (
  app,
  { store, clock, config, routes, agentImage },
) => {
  /** The host checks an agent's mounts (its configDir too) and chooses and checks its image. */
  const checked = async <T extends AgentSpec>(spec: T, stored?: AgentSpec): Promise<T> => {
    assertAgentCrossFields(spec);
    const configMount = spec.configDir
      ? [{ hostPath: spec.configDir, containerPath: AGENT_CONFIG_MOUNT }]
      : [];
    await resolveMounts([...spec.mounts, ...configMount], config.mountAllowlistFile);
    if (!agentImage) return spec;
    const { image: _, ...rest } = spec;
    const image = await agentImage(spec, stored);
    return (image === undefined ? rest : { ...rest, image }) as T;
  };
  const own = async (name: string, tenant: string | undefined) => {
    const agent = await store.getAgent(name, tenant);
    if (!agent) throw new BerthError('AGENT_NOT_FOUND', `Agent ${name} does not exist`);
    return agent;
  };

  routes.add(
    app,
    {
      method: 'POST',
      url: '/v1/agents',
      summary: 'Create an agent',
      tag,
      access: 'tenant',
      status: 201,
      returns: 'Agent',
      body: agentSpecSchema,
    },
    async ({ body, principal }) =>
      store.createAgent(await checked(body), clock.now(), principal.tenant ?? undefined),
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/agents',
      summary: `List agents by name${PAGED}`,
      tag,
      access: 'tenant',
      status: 200,
      returns: '{agents: Agent[], next: string | null}',
      query: cursorPageQuerySchema,
    },
    async ({ principal, query }) => {
      const agents = await store.listAgents(scopeOf(principal), query);
      return { agents, next: nextCursor(agents, query.limit, BY_NAME) };
    },
  );

  routes.add(
    app,
    {
      method: 'GET',
      url: '/v1/agents/:name',
      summary: 'Get an agent',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'Agent',
    },
    async ({ params, principal }) => own(params.name!, scopeOf(principal)),
  );

  routes.add(
    app,
    {
      method: 'PATCH',
      url: '/v1/agents/:name',
      summary: 'Change fields of an agent (its sessions use them from their next sandbox)',
      tag,
      access: 'tenant',
      status: 200,
      returns: 'Agent',
      body: agentPatchSchema,
    },
    async ({ params, body, principal }) => {
      const spec = agentSpecOf(await own(params.name!, scopeOf(principal)));
      const merged = parseInput(agentSpecSchema, { ...spec, ...body }, 'agent');
      return store.replaceAgentSpec(await checked(merged, spec), scopeOf(principal));
    },
  );

  routes.add(
    app,
    {
      method: 'PUT',
      url: '/v1/agents/:name',
      summary:
        'Create the agent, or replace its whole spec (fields left out take their defaults); answers what changed. Its sessions use it from their next sandbox',
      tag,
      access: 'tenant',
      status: 200,
      returns: '{agent: Agent, created: boolean, changes: {path, from?, to?}[]}',
      body: agentSpecSchema,
      parseBody: (value) => parseAgentSpec(value),
    },
    async ({ params, body, principal }) => {
      if (body.name !== params.name)
        throw new BerthError(
          'INVALID_INPUT',
          `Invalid agent: name: the body names ${body.name}, the URL ${params.name}`,
          { hint: 'Send the spec to /v1/agents/<its name>.' },
        );
      const tenant = scopeOf(principal);
      const before = await store.getAgent(params.name!, tenant);
      if (!before) {
        const agent = await store.createAgent(
          await checked(body),
          clock.now(),
          principal.tenant ?? undefined,
        );
        return { agent, created: true, changes: [] };
      }
      const stored = agentSpecOf(before);
      const agent = await store.replaceAgentSpec(await checked(body, stored), tenant);
      return { agent, created: false, changes: diffAgentSpecs(stored, agentSpecOf(agent)) };
    },
  );

  routes.add(
    app,
    {
      method: 'DELETE',
      url: '/v1/agents/:name',
      summary: 'Delete an agent that no live session uses',
      tag,
      access: 'tenant',
      status: 204,
      returns: 'nothing',
    },
    async ({ params, principal }) => {
      await store.deleteAgent(params.name!, clock.now(), scopeOf(principal));
      return undefined;
    },
  );
};
