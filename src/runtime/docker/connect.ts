/** One Dockerode client per process, reused for every call (the Engine API over its socket). */
import Dockerode from 'dockerode';
import { BerthError } from '../../core/index.js';

export function connectDocker(socketPath: string): Dockerode {
  return new Dockerode({ socketPath });
}

/** Pings the engine; a failure becomes one clear DOCKER_UNREACHABLE error naming the socket. */
export async function assertDockerReachable(docker: Dockerode, socketPath: string): Promise<void> {
  try {
    await docker.ping();
  } catch (err) {
    const reason = (err as { code?: string; message?: string }).code ?? (err as Error).message;
    throw new BerthError('DOCKER_UNREACHABLE', `Docker engine not reachable at ${socketPath} (${reason})`, {
      cause: err,
    });
  }
}
