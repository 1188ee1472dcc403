/** Whether a harness's agent image is built on this machine: harness tests skip, saying so, when it is not. */
import { join } from 'node:path';
import type { HarnessName } from '../../src/core/index.js';
import { agentImageRecipe, agentImageTag, imageContents } from '../../src/image/index.js';
import { connectDocker } from '../../src/runtime/index.js';

/** Where `berth image build` run from the repo keeps its recipe cache. */
export const CACHE_DIR = join(process.cwd(), '.berth', 'cache');

/** The reason to skip a harness's tests: its agent image is not built here (false: it is). */
export async function harnessImageMissing(harness: HarnessName): Promise<string | false> {
  const tag = agentImageTag(await agentImageRecipe(CACHE_DIR, { harnesses: [harness] }));
  const has = await imageContents(connectDocker('/var/run/docker.sock'), tag).catch(() => null);
  return has?.harnesses.includes(harness)
    ? false
    : `${tag} is not built (scripts/setup.sh test, or berth image build --with ${harness})`;
}
