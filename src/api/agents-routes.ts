/** /v1/agents: create, list, get. */
import type { FastifyPluginAsync } from 'fastify';
import { agentSpecSchema, BerthError } from '../core/index.js';
import { resolveMounts } from '../mounts/index.js';
import type { ApiDeps } from './deps.js';
import { parseInput } from './validate.js';

export const agentsRoutes: FastifyPluginAsync<ApiDeps> = async (app, { store, clock, config }) => {
  app.post('/v1/agents', async (request, reply) => {
    const spec = parseInput(agentSpecSchema, request.body, 'agent');
    await resolveMounts(spec.mounts, config.mountAllowlistFile);
    const agent = await store.createAgent(spec, clock.now());
    return reply.status(201).send(agent);
  });

  app.get('/v1/agents', async () => ({ agents: await store.listAgents() }));

  app.get<{ Params: { name: string } }>('/v1/agents/:name', async (request) => {
    const agent = await store.getAgent(request.params.name);
    if (!agent) throw new BerthError('AGENT_NOT_FOUND', `Agent ${request.params.name} does not exist`);
    return agent;
  });
};
