/**
 * What a provider is given to run a turn besides the assignment: the workspace, the
 * gateway, and the turn's progress and state. Every provider takes it: the command and
 * script ones (providers.ts), the model loops (model-turn.ts) and the harnesses
 * (harness-provider.ts).
 */
import type { GatewayClient } from './gateway-client.js';

export interface TurnContext {
  workspace: string;
  /** Model providers reach the gateway's model proxy through it. */
  gateway: GatewayClient;
  progress(text: string): Promise<void>;
  /** undefined when the key is not set. */
  getState(key: string): Promise<unknown>;
  putState(key: string, value: unknown): Promise<void>;
  /** A resident agent's sandbox: processes a turn leaves running live on into the next turns. */
  resident: boolean;
}
