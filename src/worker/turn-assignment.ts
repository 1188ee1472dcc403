/** What the runner is handed for one turn: its messages, limits and the agent's per-turn settings. */
import {
  type Agent,
  isHarness,
  MODEL_DEFAULTS,
  type ResolvedConfig,
  type ResumedCheckpoint,
  type Turn,
  type TurnAssignment,
} from '../core/index.js';
import { harnessSettings } from './harness-settings.js';

export function turnAssignmentOf(
  agent: Agent,
  config: Pick<ResolvedConfig, 'maxOutputBytes' | 'heartbeatIntervalMs'>,
  turn: Turn,
  messages: { id: number; text: string }[],
  /** The checkpoint the turn's workspace was restored from, if any. */
  resumed: ResumedCheckpoint | null = null,
): TurnAssignment {
  return {
    turnId: turn.id,
    sessionId: turn.sessionId,
    generation: turn.generation,
    attempt: turn.attempt,
    provider: agent.provider,
    messages: messages.map((m) => ({ id: m.id, text: m.text })),
    limits: { maxOutputBytes: config.maxOutputBytes, heartbeatIntervalMs: config.heartbeatIntervalMs },
    ...harnessSettings(agent),
    ...(resumed ? { checkpoint: resumed } : {}),
    ...(agent.model && !isHarness(agent.provider)
      ? {
          model: {
            model: agent.model,
            maxTokens: agent.maxTokens ?? MODEL_DEFAULTS.maxTokens,
            maxSteps: agent.maxSteps ?? MODEL_DEFAULTS.maxSteps,
            toolTimeoutMs: agent.toolTimeoutMs ?? MODEL_DEFAULTS.toolTimeoutMs,
            instructions: agent.instructions ?? '',
          },
        }
      : {}),
  };
}
