/**
 * SandboxRuntime on the Docker Engine API (dockerode, one connection reused). Exits are
 * learned from the engine's event stream (milliseconds), not by polling. Only containers
 * carrying this install's label are ever listed or reaped. A frozen sandbox is thawed before
 * it is killed, whoever froze it.
 */
import type { Readable } from 'node:stream';
import type Dockerode from 'dockerode';
import { BerthError, type Clock, jsonLines, LABELS, systemClock } from '../../core/index.js';
import type { RuntimeEvent, SandboxHandle, SandboxRuntime, SandboxSpec } from '../runtime.js';
import { assertDockerReachable } from './connect.js';
import { type FreezeTarget, freezeContainer, thawContainer } from './container-freezer.js';
import { containerOptions } from './container-spec.js';

export class DockerRuntime implements SandboxRuntime {
  readonly name = 'docker';
  /** The sandboxes this process froze, by id or name, and how: a thaw then asks the engine nothing. */
  private readonly frozen = new Map<string, FreezeTarget>();

  constructor(
    private readonly docker: Dockerode,
    private readonly socketPath: string,
    /** What event times are read from when the engine gives none: the worker's clock. @default systemClock */
    private readonly clock: Clock = systemClock,
  ) {}

  async check(image: string): Promise<void> {
    await assertDockerReachable(this.docker, this.socketPath);
    try {
      await this.docker.getImage(image).inspect();
    } catch (err) {
      if ((err as { statusCode?: number }).statusCode === 404) {
        throw new BerthError('IMAGE_MISSING', `Sandbox image ${image} is not in the Docker engine`, {
          cause: err,
        });
      }
      throw err;
    }
  }

  async create(spec: SandboxSpec): Promise<SandboxHandle> {
    const options = containerOptions(spec);
    const container = await this.docker.createContainer(options).catch((err: Error) => {
      if ((err as { statusCode?: number }).statusCode === 404 && /no such image/i.test(err.message))
        throw new BerthError('IMAGE_MISSING', `Sandbox image ${spec.image} is not in the Docker engine`, {
          cause: err,
        });
      if (/unknown runtime specified|unknown or invalid runtime/i.test(err.message)) {
        throw new BerthError(
          'ISOLATION_UNAVAILABLE',
          `Sandbox ${spec.name} needs the Docker runtime ${spec.isolation}, which the engine does not have`,
          { cause: err },
        );
      }
      throw err;
    });
    try {
      await container.start();
    } catch (err) {
      await container.remove({ force: true }).catch(() => undefined);
      throw new BerthError(
        'SANDBOX_FAILED',
        `Sandbox ${spec.name} did not start: ${(err as Error).message}`,
        {
          cause: err,
        },
      );
    }
    return { id: container.id, name: spec.name, labels: options.Labels ?? {} };
  }

  async freeze(handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<boolean> {
    const key = handle.id || handle.name;
    this.frozen.set(key, await freezeContainer(this.docker, key));
    return true;
  }

  async thaw(handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<void> {
    const key = handle.id || handle.name;
    const frozen = this.frozen.get(key);
    this.frozen.delete(key);
    await thawContainer(this.docker, key, frozen).catch(ignoreGone);
  }

  async kill(handle: Pick<SandboxHandle, 'id' | 'name'>, options: { hard?: boolean } = {}): Promise<void> {
    const container = this.docker.getContainer(handle.id || handle.name);
    // Thawed first (a worker may have died while it was frozen for a capture): a frozen
    // sandbox gets no SIGTERM, and a paused gVisor one takes seconds more to stop.
    await this.thaw(handle).catch(() => undefined);
    // stop = SIGTERM, 1 s grace, SIGKILL; then remove. 304/404/409 mean it is already going or gone.
    await (options.hard ? container.kill() : container.stop({ t: 1 })).catch(ignoreGone);
    await container.remove({ force: true, v: true }).catch(ignoreGone);
  }

  async *events(installId: string, signal: AbortSignal, sinceMs?: number): AsyncIterable<RuntimeEvent> {
    const stream = (await this.docker.getEvents({
      ...(sinceMs === undefined ? {} : { since: Math.floor(sinceMs / 1000) }),
      filters: { type: ['container'], event: ['die', 'oom'], label: [`${LABELS.install}=${installId}`] },
    })) as unknown as Readable;
    const onAbort = () => stream.destroy();
    signal.addEventListener('abort', onAbort, { once: true });
    yield { type: 'connected', at: this.clock.now() };
    const oomKilled = new Set<string>();
    try {
      for await (const line of jsonLines(stream)) {
        const e = line as {
          Action: string;
          id: string;
          Actor: { Attributes: Record<string, string> };
          timeNano?: number;
        };
        if (e.Action === 'oom') {
          oomKilled.add(e.id);
          continue;
        }
        const code = e.Actor.Attributes.exitCode;
        yield {
          type: 'exit',
          id: e.id,
          name: e.Actor.Attributes.name ?? '',
          exitCode: code === undefined ? null : Number(code),
          oomKilled: oomKilled.delete(e.id),
          at: e.timeNano ? Math.round(e.timeNano / 1e6) : this.clock.now(),
        };
      }
    } catch (err) {
      if (!signal.aborted)
        yield { type: 'disconnected', error: (err as Error).message, at: this.clock.now() };
      return;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
    if (!signal.aborted) yield { type: 'disconnected', error: 'event stream ended', at: this.clock.now() };
  }

  async list(installId: string): Promise<SandboxHandle[]> {
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: [`${LABELS.install}=${installId}`] },
    });
    return containers.map((c) => ({
      id: c.Id,
      name: (c.Names[0] ?? '').replace(/^\//, ''),
      labels: c.Labels,
    }));
  }
}

function ignoreGone(err: unknown): void {
  const status = (err as { statusCode?: number }).statusCode;
  if (status === 304 || status === 404 || status === 409) return;
  throw err;
}
