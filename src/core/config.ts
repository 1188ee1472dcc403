/**
 * The one config loader. `loadConfig(env, overrides)` validates every input once and
 * returns a frozen ResolvedConfig with defaults applied and durations in ms. Nothing
 * else in berth reads process.env, and nothing reads config at import time.
 */
import { cpus, homedir, hostname, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import { BerthError } from './errors.js';

export interface ResolvedConfig {
  /** Where the store, workspaces and sockets live. @default ./.berth (BERTH_DATA) */
  readonly dataDir: string;
  /** The store: '' = SQLite at <dataDir>/berth.db; a postgres:// URL = that PostgreSQL database, shared by workers on many machines. @default '' (BERTH_STORE) */
  readonly store: string;
  /** Address the API listens on. @default 127.0.0.1 (BERTH_HOST) */
  readonly apiHost: string;
  /** @default 7420 (BERTH_PORT) */
  readonly apiPort: number;
  /** Where CLI commands find the API. @default http://127.0.0.1:7420 (BERTH_URL) */
  readonly apiUrl: string;
  /** API token the CLI sends; empty = the admin token in <dataDir>/admin-token. @default '' (BERTH_TOKEN) */
  readonly apiToken: string;
  /** Docker Engine API socket. @default /var/run/docker.sock (BERTH_DOCKER_SOCKET) */
  readonly dockerSocket: string;
  /** Sandbox image; empty = the locally built base image. (BERTH_IMAGE) */
  readonly image: string;
  /** Where sandboxes run: 'docker' = containers on this machine's engine; 'kubernetes' = Pods on this node of a cluster (docs/kubernetes.md). @default docker (BERTH_RUNTIME) */
  readonly runtime: 'docker' | 'kubernetes';
  /** Kubernetes: the kubeconfig file; empty = $KUBECONFIG, the in-cluster service account, or ~/.kube/config. @default '' (BERTH_KUBECONFIG) */
  readonly kubeconfig: string;
  /** Kubernetes: the namespace sandbox Pods are created in. @default berth (BERTH_KUBE_NAMESPACE) */
  readonly kubeNamespace: string;
  /** Kubernetes: node labels (k=v,k2=v2) a sandbox Pod must land on: the nodes of this machine, whose files (workspaces, gateway sockets) it mounts. @default kubernetes.io/hostname=<this host's name> (BERTH_KUBE_NODE_SELECTOR) */
  readonly kubeNodeSelector: Readonly<Record<string, string>>;
  /** Kubernetes: the RuntimeClass of agents with isolation runsc (gVisor). @default gvisor (BERTH_KUBE_RUNTIME_CLASS_RUNSC) */
  readonly kubeRuntimeClassRunsc: string;
  /** Concurrent sessions per worker; 0 = this process claims no work (API only). @default min(2 x CPUs, memory / 1 GiB), at least 1 (BERTH_SLOTS) */
  readonly slots: number;
  /** Most warm (pre-booted, unbound) sandboxes a worker keeps per profile; the target adapts to demand below it; 0 = no pool, every sandbox starts cold. @default 2 (BERTH_WARM_POOL) */
  readonly warmPool: number;
  /** Warm sandboxes kept per profile in use (and for the default profile from the start) whatever the demand; capped by warmPool. @default 1 (BERTH_WARM_POOL_MIN) */
  readonly warmPoolMin: number;
  /** A worker's liveness lease, in ms; it renews every leaseMs/5. @default 10000 (BERTH_LEASE) */
  readonly leaseMs: number;
  /** How often the runner heartbeats, in ms. @default 2000 (BERTH_HEARTBEAT_INTERVAL) */
  readonly heartbeatIntervalMs: number;
  /** No heartbeat for this long kills the sandbox, in ms. @default 30000 (BERTH_HEARTBEAT_TIMEOUT) */
  readonly heartbeatTimeoutMs: number;
  /** A sandbox without work is released after this, in ms; 0 = fresh sandbox every turn. @default 30000 (BERTH_IDLE_TIMEOUT) */
  readonly idleTimeoutMs: number;
  /** A turn running longer than this is aborted, in ms. @default 600000 (BERTH_TURN_TIMEOUT) */
  readonly turnTimeoutMs: number;
  /** Backoff before try n+1 is retryBaseMs * 2^(n-1), capped. @default 1000 (BERTH_RETRY_BASE) */
  readonly retryBaseMs: number;
  /** @default 60000 (BERTH_RETRY_MAX) */
  readonly retryMaxMs: number;
  /** Tries before a message is failed. @default 5 (BERTH_MAX_TRIES) */
  readonly maxTries: number;
  /** Largest inbound message body, in bytes. @default 262144 (BERTH_MAX_MESSAGE_BYTES) */
  readonly maxMessageBytes: number;
  /** A job writing more than this to stdout or stderr is killed and fails the turn (OUTPUT_LIMIT_EXCEEDED), in bytes. @default 65536 (BERTH_MAX_OUTPUT_BYTES) */
  readonly maxOutputBytes: number;
  /** Largest object an agent may put in mediated storage, in bytes. @default 1073741824 (BERTH_STORAGE_MAX_OBJECT_BYTES) */
  readonly storageMaxObjectBytes: number;
  /** The host's mount allowlist (agents' extra read-only mounts); no file = no extra mounts. @default ~/.config/berth/mount-allowlist.json (BERTH_MOUNT_ALLOWLIST) */
  readonly mountAllowlistFile: string;
  /** Extra CA certificates (PEM file) trusted, besides the system's, for the upstream TLS of egress targets with header rules; for private servers. @default '' (BERTH_EGRESS_CA_FILE) */
  readonly egressCaFile: string;
  /** Attempts of a webhook delivery before it is a dead letter. @default 8 (BERTH_WEBHOOK_MAX_ATTEMPTS) */
  readonly webhookMaxAttempts: number;
  /** Backoff after a failed delivery attempt n is base * 2^(n-1), in ms. @default 1000 (BERTH_WEBHOOK_RETRY_BASE) */
  readonly webhookRetryBaseMs: number;
  /** @default 300000 (BERTH_WEBHOOK_RETRY_MAX) */
  readonly webhookRetryMaxMs: number;
  /** A receiver answering later than this is a failed attempt, in ms. @default 10000 (BERTH_WEBHOOK_TIMEOUT) */
  readonly webhookTimeoutMs: number;
  /** Encrypts the secret store at rest (AES-256-GCM, key derived with scrypt); empty = stored unencrypted. Never logged. @default '' (BERTH_SECRET_KEY) */
  readonly secretKey: string;
  /** Upstream of the gateway's Anthropic proxy, unless the agent names one. @default https://api.anthropic.com (ANTHROPIC_BASE_URL) */
  readonly anthropicBaseUrl: string;
  /** Upstream of the gateway's OpenAI-compatible proxy, unless the agent names one. @default https://api.openai.com/v1 (OPENAI_BASE_URL) */
  readonly openaiBaseUrl: string;
  /** @default info (BERTH_LOG_LEVEL) */
  readonly logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

const durationMs = z.union([z.number(), z.string()]).transform((raw, ctx) => {
  const parsed = parseDurationMs(String(raw));
  if (parsed === undefined) {
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: `"${raw}" is not a duration (use 500ms, 10s, 2m or plain ms)`,
    });
    return z.NEVER;
  }
  return parsed;
});
const positiveInt = z.coerce.number().int().positive();
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** Kubernetes label keys (optional DNS prefix + name) and values. */
const LABEL_KEY = /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$/;

/** 'k=v,k2=v2' → { k: 'v', k2: 'v2' }; '' → {}; null when a pair is not a valid label. */
export function parseNodeSelector(text: string): Record<string, string> | null {
  const selector: Record<string, string> = {};
  for (const pair of text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const [key = '', value, ...rest] = pair.split('=');
    if (value === undefined || rest.length > 0 || !LABEL_KEY.test(key) || !LABEL_VALUE.test(value))
      return null;
    selector[key] = value;
  }
  return selector;
}

const storeUrl = z
  .string()
  .refine(
    (s) => s === '' || (/^postgres(ql)?:\/\/[^/]/.test(s) && URL.canParse(s)),
    'use postgres://user:password@host:5432/database, or leave it empty for SQLite in the data dir',
  );

const schema = z.object({
  dataDir: z.string().min(1),
  store: storeUrl,
  apiHost: z.string().min(1),
  apiPort: z.coerce.number().int().min(0).max(65535),
  apiUrl: z.string().url().optional(),
  apiToken: z.string(),
  dockerSocket: z.string().min(1),
  image: z.string(),
  runtime: z.enum(['docker', 'kubernetes']),
  kubeconfig: z.string(),
  kubeNamespace: z.string().regex(DNS_LABEL, 'must be a Kubernetes namespace name (a-z 0-9 -, at most 63)'),
  kubeNodeSelector: z.string().transform((text, ctx) => {
    const selector = parseNodeSelector(text);
    if (!selector) {
      ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'use label=value pairs separated by commas' });
      return z.NEVER;
    }
    return selector;
  }),
  kubeRuntimeClassRunsc: z.string().regex(DNS_LABEL, 'must be a RuntimeClass name (a-z 0-9 -, at most 63)'),
  slots: z.coerce.number().int().min(0).optional(),
  warmPool: z.coerce.number().int().min(0).max(1000),
  warmPoolMin: z.coerce.number().int().min(0).max(1000),
  leaseMs: durationMs.pipe(z.number().min(500, 'must be at least 500ms')),
  heartbeatIntervalMs: durationMs.pipe(z.number().min(50, 'must be at least 50ms')),
  heartbeatTimeoutMs: durationMs,
  idleTimeoutMs: durationMs,
  turnTimeoutMs: durationMs.pipe(z.number().min(1000, 'must be at least 1s')),
  retryBaseMs: durationMs,
  retryMaxMs: durationMs,
  maxTries: positiveInt,
  maxMessageBytes: positiveInt,
  webhookMaxAttempts: positiveInt,
  webhookRetryBaseMs: durationMs,
  webhookRetryMaxMs: durationMs,
  webhookTimeoutMs: durationMs.pipe(z.number().min(100, 'must be at least 100ms')),
  maxOutputBytes: positiveInt,
  storageMaxObjectBytes: positiveInt,
  mountAllowlistFile: z.string().min(1).optional(),
  egressCaFile: z.string(),
  secretKey: z.string(),
  anthropicBaseUrl: z.string().url(),
  openaiBaseUrl: z.string().url(),
  logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
});

type Input = z.input<typeof schema>;

/** Environment variable of each option, for the loader and for error messages. */
export const CONFIG_ENV: Record<keyof Input, string> = {
  dataDir: 'BERTH_DATA',
  store: 'BERTH_STORE',
  apiHost: 'BERTH_HOST',
  apiPort: 'BERTH_PORT',
  apiUrl: 'BERTH_URL',
  apiToken: 'BERTH_TOKEN',
  dockerSocket: 'BERTH_DOCKER_SOCKET',
  image: 'BERTH_IMAGE',
  runtime: 'BERTH_RUNTIME',
  kubeconfig: 'BERTH_KUBECONFIG',
  kubeNamespace: 'BERTH_KUBE_NAMESPACE',
  kubeNodeSelector: 'BERTH_KUBE_NODE_SELECTOR',
  kubeRuntimeClassRunsc: 'BERTH_KUBE_RUNTIME_CLASS_RUNSC',
  slots: 'BERTH_SLOTS',
  warmPool: 'BERTH_WARM_POOL',
  warmPoolMin: 'BERTH_WARM_POOL_MIN',
  leaseMs: 'BERTH_LEASE',
  heartbeatIntervalMs: 'BERTH_HEARTBEAT_INTERVAL',
  heartbeatTimeoutMs: 'BERTH_HEARTBEAT_TIMEOUT',
  idleTimeoutMs: 'BERTH_IDLE_TIMEOUT',
  turnTimeoutMs: 'BERTH_TURN_TIMEOUT',
  retryBaseMs: 'BERTH_RETRY_BASE',
  retryMaxMs: 'BERTH_RETRY_MAX',
  maxTries: 'BERTH_MAX_TRIES',
  maxMessageBytes: 'BERTH_MAX_MESSAGE_BYTES',
  webhookMaxAttempts: 'BERTH_WEBHOOK_MAX_ATTEMPTS',
  webhookRetryBaseMs: 'BERTH_WEBHOOK_RETRY_BASE',
  webhookRetryMaxMs: 'BERTH_WEBHOOK_RETRY_MAX',
  webhookTimeoutMs: 'BERTH_WEBHOOK_TIMEOUT',
  maxOutputBytes: 'BERTH_MAX_OUTPUT_BYTES',
  storageMaxObjectBytes: 'BERTH_STORAGE_MAX_OBJECT_BYTES',
  mountAllowlistFile: 'BERTH_MOUNT_ALLOWLIST',
  egressCaFile: 'BERTH_EGRESS_CA_FILE',
  secretKey: 'BERTH_SECRET_KEY',
  anthropicBaseUrl: 'ANTHROPIC_BASE_URL',
  openaiBaseUrl: 'OPENAI_BASE_URL',
  logLevel: 'BERTH_LOG_LEVEL',
};

const DEFAULTS: Input = {
  dataDir: '.berth',
  store: '',
  apiHost: '127.0.0.1',
  apiPort: 7420,
  apiToken: '',
  dockerSocket: '/var/run/docker.sock',
  image: '',
  runtime: 'docker',
  kubeconfig: '',
  kubeNamespace: 'berth',
  kubeNodeSelector: '',
  kubeRuntimeClassRunsc: 'gvisor',
  warmPool: 2,
  warmPoolMin: 1,
  leaseMs: 10_000,
  heartbeatIntervalMs: 2_000,
  heartbeatTimeoutMs: 30_000,
  idleTimeoutMs: 30_000,
  turnTimeoutMs: 600_000,
  retryBaseMs: 1_000,
  retryMaxMs: 60_000,
  maxTries: 5,
  maxMessageBytes: 256 * 1024,
  webhookMaxAttempts: 8,
  webhookRetryBaseMs: 1_000,
  webhookRetryMaxMs: 300_000,
  webhookTimeoutMs: 10_000,
  maxOutputBytes: 64 * 1024,
  egressCaFile: '',
  storageMaxObjectBytes: 1024 ** 3,
  secretKey: '',
  anthropicBaseUrl: 'https://api.anthropic.com',
  openaiBaseUrl: 'https://api.openai.com/v1',
  logLevel: 'info',
};

/** Validates env (then overrides, e.g. CLI flags) over the defaults. Throws CONFIG_INVALID naming the variable. */
export function loadConfig(
  env: Record<string, string | undefined>,
  overrides: Partial<Record<keyof Input, string | number>> = {},
): ResolvedConfig {
  const raw: Record<string, unknown> = { ...DEFAULTS };
  for (const [key, name] of Object.entries(CONFIG_ENV)) {
    const value = env[name];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  for (const [key, value] of Object.entries(overrides)) if (value !== undefined) raw[key] = value;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0]) as keyof Input;
    throw new BerthError(
      'CONFIG_INVALID',
      `Invalid ${CONFIG_ENV[key] ?? key}=${JSON.stringify(key === 'store' ? redactUrl(String(raw[key])) : raw[key])}: ${issue.message}`,
    );
  }
  const c = parsed.data;
  if (c.heartbeatTimeoutMs <= c.heartbeatIntervalMs) {
    throw new BerthError(
      'CONFIG_INVALID',
      `BERTH_HEARTBEAT_TIMEOUT (${c.heartbeatTimeoutMs} ms) must exceed BERTH_HEARTBEAT_INTERVAL (${c.heartbeatIntervalMs} ms)`,
    );
  }
  return Object.freeze({
    ...c,
    dataDir: resolve(c.dataDir),
    apiUrl: c.apiUrl ?? `http://${c.apiHost === '0.0.0.0' ? '127.0.0.1' : c.apiHost}:${c.apiPort}`,
    slots: c.slots ?? defaultSlots(cpus().length, totalmem()),
    kubeconfig: c.kubeconfig && resolve(c.kubeconfig),
    kubeNodeSelector: Object.freeze(
      Object.keys(c.kubeNodeSelector).length > 0
        ? c.kubeNodeSelector
        : { 'kubernetes.io/hostname': hostname() },
    ),
    egressCaFile: c.egressCaFile && resolve(c.egressCaFile),
    mountAllowlistFile: resolve(
      c.mountAllowlistFile ?? join(env.HOME || homedir(), '.config', 'berth', 'mount-allowlist.json'),
    ),
  });
}

/** A URL without its password (user:***@), for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, '$1:***@');
}

/** Two sessions per core, but never more than one per GiB of memory. */
export function defaultSlots(cpuCount: number, memoryBytes: number): number {
  return Math.max(1, Math.min(2 * cpuCount, Math.floor(memoryBytes / 2 ** 30)));
}

export function parseDurationMs(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) return undefined;
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}
