// The base image built from image/Dockerfile through the Engine API's build endpoint, for
// machines that can reach a container registry.
//
// Invariants:
// - Same contract and same tag as the offline build (see buildFromDockerfile).
// - A failure says whether the registry looked unreachable, and points to the offline build.
import { fileURLToPath } from 'node:url';
import type Dockerode from 'dockerode';
import type { BuildProgress } from './base-image-recipe.js';
import { followJsonStream } from './engine-stream.js';
import { errorText } from './host-exec.js';

/** image/Dockerfile, four levels up from dist/src/runtime/docker/ (this code runs compiled only). */
const IMAGE_DIR = fileURLToPath(new URL('../../../../image/', import.meta.url));

/**
 * For machines with a registry: image/Dockerfile on node:20-bookworm-slim. It meets the same
 * contract as the offline build and gets the same tag, so the runtime needs no setting to know
 * how its base image was made; its node is the image's Node 20, not the host binary.
 */
export async function buildFromDockerfile(
  docker: Dockerode,
  tag: string,
  onProgress: (p: BuildProgress) => void,
): Promise<void> {
  onProgress({ phase: 'docker build' });
  try {
    const response = await docker.buildImage(
      { context: IMAGE_DIR, src: ['Dockerfile'] },
      { t: tag, rm: true },
    );
    await followJsonStream(response, (line) => {
      const step = /^Step (\d+)\/(\d+)/.exec(String(line.stream ?? ''));
      if (step) onProgress({ phase: 'docker build', done: Number(step[1]) - 1, total: Number(step[2]) });
    });
  } catch (err) {
    const text = errorText(err);
    const registry = /pull|registry|manifest|dial tcp|lookup|timeout|TLS|connection refused|no such host/i;
    const reason = registry.test(text) ? 'the container registry is unreachable' : 'the build failed';
    throw new Error(
      `Cannot build ${tag} from image/Dockerfile: ${reason} (${text}). The default offline build ` +
        '(`berth image build`, debootstrap) needs no registry.',
      { cause: err },
    );
  }
}
