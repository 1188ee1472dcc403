/** image: the sandbox base image, built offline (debootstrap + the host's node) or from image/Dockerfile, cached by its recipe's hash; agent images with harnesses on top of it. */
export {
  AGENT_IMAGE_REPO,
  agentImageBuildCommand,
  agentImageRecipe,
  agentImageTag,
  ensureAgentImage,
  imageHarnesses,
  parseHarnesses,
} from './agent-image.js';
export { type BuildProgress, baseImageRecipe, baseImageTag, ensureBaseImage } from './base-image.js';
export { HARNESS_RECIPES } from './harness-recipes.js';
