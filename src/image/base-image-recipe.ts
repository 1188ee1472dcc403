/**
 * What a base image build is given, its recipe (whose hash is the image's tag, see
 * base-image.ts), and what it reports as it goes. Both builds (debootstrap-build.ts,
 * dockerfile-build.ts) and the agent images on top of them take these.
 */
export interface BaseImageRecipe {
  recipeVersion: number;
  suite: string;
  variant: 'minbase';
  packages: readonly string[];
  nodePath: string;
  nodeSha256: string;
}

export interface BuildProgress {
  phase: string;
  done?: number;
  total?: number;
}
