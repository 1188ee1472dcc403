/** A host secret a pushing channel's route checks requests against (Slack's signing secret, Telegram's secret_token). */
import { BerthError } from '../core/index.js';
import type { PluginDeps } from './deps.js';

/** The secret's value; CHANNEL_NOT_ACCEPTING (the platform delivers again later) when the host's secret store lacks it. */
export async function channelSecret(
  deps: Pick<PluginDeps, 'secrets'>,
  name: string,
  channelId: string,
  operation: string,
): Promise<string> {
  const value = await deps.secrets?.get(name);
  if (value === undefined)
    throw new BerthError(
      'CHANNEL_NOT_ACCEPTING',
      `Secret ${name} of channel ${channelId} is not in the host's secret store (${operation})`,
    );
  return value;
}
