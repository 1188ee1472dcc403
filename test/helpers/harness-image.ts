/** Whether an agent image is built on this machine: tests that need one skip, saying so, when it is not. */
import { join } from 'node:path';
import type { AgentImageNeeds, HarnessName } from '../../src/core/index.js';
import {
  agentImageBuildCommand,
  agentImageRecipe,
  agentImageTag,
  imageContents,
  imageLacks,
} from '../../src/image/index.js';
import { connectDocker } from '../../src/runtime/index.js';

/** Where `berth image build` run from the repo keeps its recipe cache. */
export const CACHE_DIR = join(process.cwd(), '.berth', 'cache');

/** The reason to skip a test that needs this agent image: it is not built here (false: it is). */
export async function agentImageMissing(needs: AgentImageNeeds): Promise<string | false> {
  const tag = agentImageTag(await agentImageRecipe(CACHE_DIR, needs));
  const has = await imageContents(connectDocker('/var/run/docker.sock'), tag).catch(() => null);
  return imageLacks(has, needs).length === 0
    ? false
    : `${tag} is not built (scripts/setup.sh test, or ${agentImageBuildCommand(needs)})`;
}

/** The reason to skip a harness's tests: its agent image is not built here (false: it is). */
export function harnessImageMissing(harness: HarnessName): Promise<string | false> {
  return agentImageMissing({ harnesses: [harness], apt: [], npm: [] });
}
