/**
 * How the CLI reaches the API: BERTH_URL, and BERTH_TOKEN or else the admin token that
 * `berth up` wrote to <data>/admin-token (0600): whoever may read the data dir is the operator.
 */

import { Berth } from '../client/index.js';
import { loadConfig } from '../core/index.js';
import { readAdminToken } from '../secrets/index.js';

export async function connect(env: NodeJS.ProcessEnv): Promise<Berth> {
  const config = loadConfig(env);
  const token = config.apiToken || ((await readAdminToken(config.dataDir)) ?? undefined);
  return new Berth({ url: config.apiUrl, token });
}
