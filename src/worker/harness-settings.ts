/** What a harness turn carries besides its messages: the agent's model, timeout, instructions and config dir. */
import {
  AGENT_CONFIG_MOUNT,
  type AgentSpec,
  type HarnessSettings,
  isHarness,
  MODEL_DEFAULTS,
  MOUNTS_ROOT,
} from '../core/index.js';

export function harnessSettings(agent: AgentSpec): { harness?: HarnessSettings } {
  if (!isHarness(agent.provider) || !agent.model) return {};
  return {
    harness: {
      model: agent.model,
      timeoutMs: agent.harnessTimeoutMs ?? MODEL_DEFAULTS.harnessTimeoutMs,
      instructions: agent.instructions ?? '',
      ...(agent.configDir ? { configDir: `${MOUNTS_ROOT}/${AGENT_CONFIG_MOUNT}` } : {}),
    },
  };
}
