/**
 * A Kubernetes watch on Pods as an async iterable: the API server pushes every change (no
 * polling). Ends with a 'closed' item when the server or the network ends the stream; the
 * caller lists again and re-watches from the list's resourceVersion.
 */
import { type KubeConfig, type V1Pod, Watch } from '@kubernetes/client-node';
import { WakeSignal } from '../../core/index.js';

export type PodChange =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; pod: V1Pod }
  | { type: 'closed'; error: string };

export async function* watchPods(
  kc: KubeConfig,
  namespace: string,
  query: { labelSelector?: string; fieldSelector?: string; resourceVersion?: string },
  signal: AbortSignal,
): AsyncIterable<PodChange> {
  const buffered: PodChange[] = [];
  const wake = new WakeSignal();
  const push = (change: PodChange) => {
    buffered.push(change);
    wake.notify();
  };
  const controller = await new Watch(kc).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { ...query, allowWatchBookmarks: false },
    (type, object: V1Pod & { code?: number; message?: string }) => {
      if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED') push({ type, pod: object });
      // ERROR carries a Status, e.g. 410 Gone: the resourceVersion is too old; list again.
      else if (type === 'ERROR')
        push({ type: 'closed', error: `${object.code ?? ''} ${object.message ?? type}` });
    },
    (err: unknown) =>
      push({ type: 'closed', error: err ? String((err as Error).message ?? err) : 'watch ended' }),
  );
  // Wakes the loop too: an aborted watch does not always call `done`.
  const stop = () => {
    controller.abort();
    wake.notify();
  };
  signal.addEventListener('abort', stop, { once: true });
  try {
    while (!signal.aborted) {
      const change = buffered.shift();
      if (!change) {
        await wake.wait(60_000);
        continue;
      }
      yield change;
      if (change.type === 'closed') return;
    }
  } finally {
    signal.removeEventListener('abort', stop);
    stop();
  }
}
