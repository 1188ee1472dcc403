/** One KubeConfig per process: the named file, else $KUBECONFIG, the in-cluster service account or ~/.kube/config. */
import { KubeConfig } from '@kubernetes/client-node';
import { BerthError } from '../../core/index.js';

export function loadKubeConfig(file: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromDefault();
  } catch (err) {
    throw new BerthError(
      'KUBERNETES_UNREACHABLE',
      `Cannot read the kubeconfig ${file || '(default)'}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  if (!kc.getCurrentCluster()) {
    throw new BerthError('KUBERNETES_UNREACHABLE', `The kubeconfig ${file || '(default)'} names no cluster`);
  }
  return kc;
}
