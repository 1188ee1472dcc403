/**
 * SandboxRuntime on the Kubernetes API: one Pod per sandbox (pod-spec.ts), created in the
 * configured namespace on the nodes of this machine. Starts, exits and deletions are learned
 * from watches (the API server pushes them), never by polling. Only Pods carrying this
 * install's label are listed or reaped. A kill is graceful (the Pod's 1 s grace), then forced
 * (grace 0) if the Pod is still there after a few seconds.
 */
import { ApiException, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { BerthError, type Clock, systemClock } from '../../core/index.js';
import type { RuntimeEvent, SandboxHandle, SandboxRuntime, SandboxSpec } from '../runtime.js';
import {
  installSelector,
  type PodSettings,
  podManifest,
  podName,
  SANDBOX_NAME_ANNOTATION,
} from './pod-spec.js';
import { pendingReason, podState } from './pod-status.js';
import { watchPods } from './pod-watch.js';

/** A Pod not running after this is deleted and its start failed (image pulls are not berth's business here). */
const START_TIMEOUT_MS = 120_000;
/** How long a graceful delete may take before it is forced. */
const GRACEFUL_DELETE_MS = 5_000;

export class KubernetesRuntime implements SandboxRuntime {
  readonly name = 'kubernetes';
  private readonly core: CoreV1Api;

  constructor(
    private readonly kc: KubeConfig,
    private readonly settings: PodSettings,
    /** Event times: the worker's clock. @default systemClock */
    private readonly clock: Clock = systemClock,
  ) {
    this.core = kc.makeApiClient(CoreV1Api);
  }

  /** The API server answers, the namespace exists and a Ready node matches the node selector. */
  async check(_image: string): Promise<void> {
    const server = this.kc.getCurrentCluster()?.server ?? '(no cluster in the kubeconfig)';
    const { namespace, nodeSelector } = this.settings;
    try {
      await this.core.readNamespace({ name: namespace });
    } catch (err) {
      if (statusOf(err) === 404) {
        throw new BerthError('KUBERNETES_UNREACHABLE', `Namespace ${namespace} does not exist on ${server}`, {
          cause: err,
        });
      }
      throw new BerthError(
        'KUBERNETES_UNREACHABLE',
        `Kubernetes API at ${server} not usable (${describe(err)})`,
        { cause: err },
      );
    }
    const selector = Object.entries(nodeSelector)
      .map(([k, v]) => `${k}=${v}`)
      .join(',');
    const nodes = await this.core.listNode({ labelSelector: selector });
    const ready = nodes.items.filter((n) =>
      n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
    );
    if (ready.length === 0) {
      throw new BerthError(
        'KUBERNETES_UNREACHABLE',
        `No Ready node of ${server} matches BERTH_KUBE_NODE_SELECTOR=${selector} (${nodes.items.length} match, none Ready)`,
      );
    }
  }

  /** No freeze: the API has no pause for a Pod's containers, so a capture runs with the sandbox running. */
  async freeze(_handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<boolean> {
    return false;
  }

  async thaw(_handle: Pick<SandboxHandle, 'id' | 'name'>): Promise<void> {}

  async create(spec: SandboxSpec): Promise<SandboxHandle> {
    const manifest = podManifest(spec, this.settings);
    const name = manifest.metadata!.name!;
    const namespace = this.settings.namespace;
    let created: V1Pod;
    try {
      created = await this.core.createNamespacedPod({ namespace, body: manifest });
    } catch (err) {
      const message = describe(err);
      if (statusOf(err) === 403 && /RuntimeClass/i.test(message)) {
        throw new BerthError(
          'ISOLATION_UNAVAILABLE',
          `Sandbox ${spec.name} needs the RuntimeClass ${this.settings.runtimeClassRunsc}: ${message}`,
          { cause: err },
        );
      }
      throw new BerthError('SANDBOX_FAILED', `Pod ${name} was not created: ${message}`, { cause: err });
    }
    const handle = { id: name, name: spec.name, labels: manifest.metadata!.labels ?? {} };
    try {
      await this.waitStarted(created);
    } catch (err) {
      await this.kill(handle, { hard: true }).catch(() => undefined);
      throw err;
    }
    return handle;
  }

  /** Resolves once the runner container runs (or has already exited: events() reports that); throws when it cannot start. */
  private async waitStarted(created: V1Pod): Promise<void> {
    const name = created.metadata!.name!;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), START_TIMEOUT_MS);
    let last = created;
    try {
      for await (const pod of this.followPod(name, abort.signal, created)) {
        if (!pod) throw new BerthError('SANDBOX_FAILED', `Pod ${name} was deleted while starting`);
        last = pod;
        const state = podState(pod);
        if (state.kind === 'running' || state.kind === 'exited') return;
        if (state.kind === 'failed-to-start') {
          throw new BerthError(state.code, `Pod ${name} cannot start: ${state.reason}`);
        }
      }
      throw new BerthError(
        'SANDBOX_FAILED',
        `Pod ${name} did not start within ${START_TIMEOUT_MS / 1000} s: ${pendingReason(last)}`,
      );
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  }

  async kill(handle: Pick<SandboxHandle, 'id' | 'name'>, options: { hard?: boolean } = {}): Promise<void> {
    const name = handle.id || podName(handle.name);
    if (!options.hard) {
      const deleted = await this.deletePod(name, 1);
      if (!deleted || (await this.waitGone(name, GRACEFUL_DELETE_MS))) return;
    }
    // Forced: the API object goes at once and the kubelet kills what is left.
    await this.deletePod(name, 0);
    await this.waitGone(name, GRACEFUL_DELETE_MS);
  }

  /** false when the Pod was already gone. */
  private async deletePod(name: string, gracePeriodSeconds: number): Promise<boolean> {
    try {
      await this.core.deleteNamespacedPod({ name, namespace: this.settings.namespace, gracePeriodSeconds });
      return true;
    } catch (err) {
      if (statusOf(err) === 404) return false;
      throw err;
    }
  }

  /** true once the Pod object is gone (watched), false after timeoutMs. */
  private async waitGone(name: string, timeoutMs: number): Promise<boolean> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    try {
      for await (const pod of this.followPod(name, abort.signal)) if (!pod) return true;
      return false;
    } finally {
      clearTimeout(timer);
      abort.abort();
    }
  }

  /**
   * One Pod as it changes, watched: its current version (`from`, or read), then each change;
   * null once it is gone. A closed watch is followed by a fresh read (a change may have
   * happened in between). Ends when the signal aborts.
   */
  private async *followPod(name: string, signal: AbortSignal, from?: V1Pod): AsyncIterable<V1Pod | null> {
    const namespace = this.settings.namespace;
    const fieldSelector = `metadata.name=${name}`;
    let current: { pod: V1Pod | null; resourceVersion: string } | null = from
      ? { pod: from, resourceVersion: from.metadata?.resourceVersion ?? '0' }
      : null;
    while (!signal.aborted) {
      if (!current) {
        const list = await this.core.listNamespacedPod({ namespace, fieldSelector });
        current = { pod: list.items[0] ?? null, resourceVersion: list.metadata?.resourceVersion ?? '0' };
      }
      yield current.pod;
      for await (const change of watchPods(
        this.kc,
        namespace,
        { fieldSelector, resourceVersion: current.resourceVersion },
        signal,
      )) {
        if (change.type === 'closed') break;
        yield change.type === 'DELETED' ? null : change.pod;
      }
      current = null;
    }
  }

  async *events(installId: string, signal: AbortSignal): AsyncIterable<RuntimeEvent> {
    const namespace = this.settings.namespace;
    const labelSelector = installSelector(installId);
    // Pods whose exit was reported, by uid: a Pod reports once, whatever changes follow.
    const reported = new Set<string>();
    const exitOf = (pod: V1Pod, deleted: boolean): RuntimeEvent | null => {
      const uid = pod.metadata?.uid ?? '';
      if (reported.has(uid)) {
        if (deleted) reported.delete(uid);
        return null;
      }
      const state = podState(pod);
      if (state.kind !== 'exited' && !deleted) return null;
      if (!deleted) reported.add(uid);
      return {
        type: 'exit',
        id: pod.metadata?.name ?? '',
        name: pod.metadata?.annotations?.[SANDBOX_NAME_ANNOTATION] ?? '',
        exitCode: state.kind === 'exited' ? state.exitCode : null,
        oomKilled: state.kind === 'exited' && state.oomKilled,
        at: this.clock.now(),
      };
    };
    let list: Awaited<ReturnType<CoreV1Api['listNamespacedPod']>>;
    try {
      list = await this.core.listNamespacedPod({ namespace, labelSelector });
    } catch (err) {
      yield { type: 'disconnected', error: describe(err), at: this.clock.now() };
      return;
    }
    yield { type: 'connected', at: this.clock.now() };
    // What happened while nobody watched: Pods that exited meanwhile.
    for (const pod of list.items) {
      const exit = exitOf(pod, false);
      if (exit) yield exit;
    }
    for await (const change of watchPods(
      this.kc,
      namespace,
      { labelSelector, resourceVersion: list.metadata?.resourceVersion ?? '0' },
      signal,
    )) {
      if (change.type === 'closed') {
        if (!signal.aborted) yield { type: 'disconnected', error: change.error, at: this.clock.now() };
        return;
      }
      const exit = exitOf(change.pod, change.type === 'DELETED');
      if (exit) yield exit;
    }
  }

  async list(installId: string): Promise<SandboxHandle[]> {
    const pods = await this.core.listNamespacedPod({
      namespace: this.settings.namespace,
      labelSelector: installSelector(installId),
    });
    return pods.items.map((pod) => ({
      id: pod.metadata?.name ?? '',
      name: pod.metadata?.annotations?.[SANDBOX_NAME_ANNOTATION] ?? '',
      labels: pod.metadata?.labels ?? {},
    }));
  }
}

function statusOf(err: unknown): number | undefined {
  return err instanceof ApiException ? err.code : undefined;
}

/** The API server's message (a Status object's `message`) rather than the client's wrapper text. */
function describe(err: unknown): string {
  if (err instanceof ApiException) {
    try {
      const body = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
      if (body?.message) return `${err.code}: ${body.message}`;
    } catch {
      // not JSON: fall through to the client's message
    }
    return `${err.code}: ${String(err.body).slice(0, 300)}`;
  }
  const e = err as { code?: string; message?: string };
  return e.code ?? e.message ?? String(err);
}
