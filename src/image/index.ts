/** image: the sandbox base image, built offline (debootstrap + the host's node) or from image/Dockerfile, cached by its recipe's hash; agent images with harnesses and an agent's packages on top of it. */
export {
  AGENT_IMAGE_REPO,
  type AgentImageWants,
  agentImageBuildCommand,
  agentImageRecipe,
  agentImageTag,
  ensureAgentImage,
  imageContents,
  imageLacks,
  PACKAGES_PREFIX,
  parseHarnesses,
} from './agent-image.js';
export { type AgentImageCheck, agentImageCheck } from './agent-image-check.js';
export { baseImageRecipe, baseImageTag, ensureBaseImage } from './base-image.js';
export type { BuildProgress } from './base-image-recipe.js';
export { HARNESS_RECIPES } from './harness-recipes.js';
