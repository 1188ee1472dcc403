/** `berth image …` with the host's Docker connection and cache dir. */
import type { Command } from 'commander';
import { loadConfig } from '../core/index.js';
import { connectDocker } from '../runtime/index.js';
import { hostPaths } from '../worker/index.js';
import { connect } from './connect.js';
import { imageCommand } from './image-command.js';

export function imageCommandFor(env: NodeJS.ProcessEnv): Command {
  return imageCommand({
    docker: () => connectDocker(loadConfig(env).dockerSocket),
    cacheDir: () => hostPaths(loadConfig(env).dataDir).imageCacheDir,
    agent: async (name) => (await connect(env)).agents.get(name),
  });
}
