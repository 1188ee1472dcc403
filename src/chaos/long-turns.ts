/**
 * The long-turn workload of a chaos run (`berth chaos --long-turns N`): N more sessions,
 * each sending one message to an `anthropic` agent whose model is the run's scripted
 * Messages API (scripted-model.ts), so that its one turn makes LONG_TURN_STEPS tool calls,
 * each a model call berth checkpoints, then replies (workload.ts, longTurnPlan). Faults
 * that hit such a turn show what a resume costs: the redone calls (redone-calls.ts).
 *
 * The agent reaches the model through the workers' model proxy on this host, so the run's
 * workers must share its network (not on nodes, nor in namespaces of a partition). Its
 * key is a host secret of the run's own (SECRET), written before any worker starts.
 *
 * Faults are aimed at the long turns by how far their model calls went (longTurnsPast): each
 * one's sandbox is killed once midway (KILL_CALL, sandbox-kill.ts), since kills at an
 * interval, among many short turns, often missed a turn that runs a few seconds; a blob store
 * kill comes at the first one's BLOBS_KILL_CALL, so the outage meets its checkpoint uploads.
 *
 * Invariants: the agent is put (created or replaced), so a kept data dir's agent from an
 * earlier run names this run's model.
 */
import type { ApiClient } from '../client/index.js';
import { hostPaths, loadConfig } from '../core/index.js';
import { SecretStore } from '../secrets/index.js';
import { type ScriptedModel, startScriptedModel } from './scripted-model.js';
import { LONG_TURN_STEPS } from './workload.js';

export const LONG_AGENT = 'chaos-long';
const SECRET = 'chaos-model';
const LONG_MARK = '-long-';

/** The ids of a run's long sessions. */
export function longSessionIds(runTag: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `chaos-${runTag}${LONG_MARK}${i + 1}`);
}

/** The call at which a long turn's sandbox is killed: half its steps done. */
export const KILL_CALL = LONG_TURN_STEPS / 2;
/** The call at which a blob store kill is due: a quarter of the steps done, checkpoints still to upload. */
export const BLOBS_KILL_CALL = LONG_TURN_STEPS / 4;

/** The long sessions whose turn has asked the model for call `index` or a later one. */
export function longTurnsPast(model: ScriptedModel): (index: number) => string[] {
  return (index) => [...new Set(model.calls.filter((c) => c.index >= index).map((c) => c.session))];
}

/** Starts the scripted model and writes the agent's key into the host's secrets (`env` is the children's). */
export async function startLongTurnModel(env: NodeJS.ProcessEnv): Promise<ScriptedModel> {
  const config = loadConfig(env);
  await new SecretStore({ path: hostPaths(config.dataDir).secretsFile, key: config.secretKey }).set(
    SECRET,
    'sk-chaos-scripted-model',
  );
  return startScriptedModel();
}

/** Puts the long turns' agent, pointed at the scripted model. */
export async function putLongTurnAgent(client: ApiClient, model: ScriptedModel): Promise<void> {
  await client.request('PUT', `/v1/agents/${LONG_AGENT}`, {
    name: LONG_AGENT,
    provider: 'anthropic',
    model: 'chaos-scripted',
    baseUrl: model.url,
    secret: SECRET,
    // Room for the reply call and a resumed loop's steps.
    maxSteps: LONG_TURN_STEPS + 10,
    memoryMb: 256,
  });
}
