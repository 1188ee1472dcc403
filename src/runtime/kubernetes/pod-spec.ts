/**
 * The Pod a sandbox is on Kubernetes: the same always-on hardening as the Docker container
 * (container-spec.ts) in Pod terms — non-root, no privilege escalation, every capability
 * dropped, read-only root, seccomp RuntimeDefault, no service-account token, no service
 * links, no host namespaces — plus resource requests = limits (Guaranteed QoS), this
 * install's labels and the RuntimeClass of the agent's isolation tier. Pure, so a unit test
 * can read it.
 */
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { LABELS, SANDBOX_RUN_DIR } from '../../core/index.js';
import { RUNNER_ENTRY } from '../runner-bundle.js';
import type { SandboxSpec } from '../runtime.js';
import { RUNNER_MOUNT, sandboxEnv, sandboxLabels, WORKSPACE_MOUNT } from '../sandbox-contract.js';

/** Annotation holding the sandbox's berth name (Pod names are DNS names, berth's are not). */
export const SANDBOX_NAME_ANNOTATION = 'berth.sandbox';
export const RUNNER_CONTAINER = 'runner';
const SANDBOX_UID = 1000;

export interface PodSettings {
  namespace: string;
  /** Labels of the nodes that share this machine's files (slots, gateway sockets). */
  nodeSelector: Readonly<Record<string, string>>;
  /** RuntimeClass per isolation tier; runc runs on the cluster's default handler. */
  runtimeClassRunsc: string;
}

/**
 * Deterministic: the same sandbox name always gives the same Pod, so a restarted worker finds
 * it. Readable prefix (lower-cased, other characters as '-') + a hash of the exact name, so two
 * names differing only in case or punctuation never share a Pod.
 */
export function podName(sandboxName: string): string {
  const readable = sandboxName
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, 50)
    .replace(/-+$/, '');
  const hash = createHash('sha256').update(sandboxName).digest('hex').slice(0, 10);
  return `${readable}-${hash}`;
}

/** Label values are at most 63 characters of [A-Za-z0-9_.-]; longer berth values are cut (the annotation keeps the name). */
function labelValue(value: string): string {
  return value
    .replace(/[^A-Za-z0-9_.-]/g, '_')
    .slice(0, 63)
    .replace(/[^A-Za-z0-9]+$/, '');
}

export function podManifest(spec: SandboxSpec, settings: PodSettings): V1Pod {
  const labels = Object.fromEntries(
    Object.entries(sandboxLabels(spec)).map(([key, value]) => [key, labelValue(value)]),
  );
  const resources = { cpu: `${Math.max(1, Math.round(spec.cpus * 1000))}m`, memory: `${spec.memoryMb}Mi` };
  const hostDir = (name: string, path: string) => ({ name, hostPath: { path, type: 'Directory' } });
  const tmpfs = (name: string) => ({ name, emptyDir: { medium: 'Memory', sizeLimit: '64Mi' } });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: podName(spec.name),
      namespace: settings.namespace,
      labels: { ...labels, 'app.kubernetes.io/managed-by': 'berth' },
      annotations: { [SANDBOX_NAME_ANNOTATION]: spec.name },
    },
    spec: {
      restartPolicy: 'Never',
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      // The pause process is PID 1 and reaps what the runner's jobs orphan (Docker: Init: true).
      shareProcessNamespace: true,
      // The runner's own grace (Docker: stop with 1 s); a forced delete follows (kubernetes-runtime.ts).
      terminationGracePeriodSeconds: 1,
      nodeSelector: { ...settings.nodeSelector },
      ...(spec.isolation === 'runsc' ? { runtimeClassName: settings.runtimeClassRunsc } : {}),
      securityContext: {
        runAsUser: SANDBOX_UID,
        runAsGroup: SANDBOX_UID,
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      containers: [
        {
          name: RUNNER_CONTAINER,
          image: spec.image,
          imagePullPolicy: 'IfNotPresent',
          command: ['node', `${RUNNER_MOUNT}/${RUNNER_ENTRY}`],
          workingDir: WORKSPACE_MOUNT,
          env: sandboxEnv(spec).map((entry) => {
            const eq = entry.indexOf('=');
            return { name: entry.slice(0, eq), value: entry.slice(eq + 1) };
          }),
          resources: { requests: resources, limits: resources },
          securityContext: {
            allowPrivilegeEscalation: false,
            privileged: false,
            readOnlyRootFilesystem: true,
            runAsNonRoot: true,
            capabilities: { drop: ['ALL'] },
            seccompProfile: { type: 'RuntimeDefault' },
          },
          volumeMounts: [
            { name: 'runner', mountPath: RUNNER_MOUNT, readOnly: true },
            { name: 'run', mountPath: SANDBOX_RUN_DIR, readOnly: true },
            // HostToContainer = rslave: each turn's overlay, mounted on the slot later, appears here.
            { name: 'workspace', mountPath: WORKSPACE_MOUNT, mountPropagation: 'HostToContainer' },
            { name: 'tmp', mountPath: '/tmp' },
            { name: 'shm', mountPath: '/dev/shm' },
            ...spec.extraMounts.map((m, i) => ({ name: `data-${i}`, mountPath: m.target, readOnly: true })),
          ],
        },
      ],
      volumes: [
        hostDir('runner', spec.runnerDir),
        hostDir('run', spec.runDir),
        hostDir('workspace', spec.workspaceDir),
        tmpfs('tmp'),
        tmpfs('shm'),
        ...spec.extraMounts.map((m, i) => ({ name: `data-${i}`, hostPath: { path: m.source } })),
      ],
    },
  };
}

/** The label selector of one install's Pods. */
export function installSelector(installId: string): string {
  return `${LABELS.install}=${labelValue(installId)}`;
}
