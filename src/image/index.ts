/** image: the sandbox base image, built offline (debootstrap + the host's node) or from image/Dockerfile, cached by its recipe's hash. */
export { type BuildProgress, baseImageRecipe, baseImageTag, ensureBaseImage } from './base-image.js';
