/** `berth image …` with the host's Docker connection and cache dir. */
import type { Command } from 'commander';
import { hostPaths, loadConfig } from '../core/index.js';
import { connect } from './connect.js';
import { imageCommand } from './image-command.js';

export function imageCommandFor(env: NodeJS.ProcessEnv): Command {
  return imageCommand({
    // The runtime's modules load only for a command that talks to Docker.
    docker: async () => (await import('../runtime/index.js')).connectDocker(loadConfig(env).dockerSocket),
    cacheDir: () => hostPaths(loadConfig(env).dataDir).imageCacheDir,
    agent: async (name) => (await connect(env)).agents.get(name),
  });
}
