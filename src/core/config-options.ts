/**
 * Every host option, declared once: its environment variable, its schema, its default, its
 * unit and what it does. loadConfig (config.ts) validates and defaults from this table,
 * ResolvedConfig's type is derived from it, and the option table of docs/config.md is
 * rendered from it (configOptionsTable: scripts/config-table.js rewrites the doc after a
 * change, config.test.ts fails while the two differ). Order = the doc's order.
 */
import { z } from 'zod';
import { BLOBS_URL_RULE, type BlobsLocation, parseBlobsUrl } from './blobs-url.js';
import { parsePostgresUrl } from './postgres-url.js';

export interface ConfigOption<S extends z.ZodTypeAny> {
  /** The environment variable that sets it. */
  env: string;
  /** Validates (and converts) what the environment, a flag or the default gives. */
  schema: S;
  /** What the loader starts from, written as a user would (durations as `10s`); absent = derived at load (loadConfig). */
  default?: z.input<S>;
  /** Its unit and range, as the doc shows them. */
  unit: string;
  /** How the doc shows the default when the value alone does not say it (a derived or resolved default). */
  defaultDoc?: string;
  /** What it does, as the doc says it (Markdown). */
  doc: string;
}

function option<S extends z.ZodTypeAny>(spec: ConfigOption<S>): ConfigOption<S> {
  return spec;
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
/** An address to listen on: host or [IPv6] and a port (0: a free one). */
export const LISTEN_ADDRESS = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/;
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
/** Kubernetes label keys (optional DNS prefix + name) and values. */
const LABEL_KEY = /^([a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?)?$/;

const storeUrl = z.string().superRefine((s, ctx) => {
  if (s === '') return;
  const parsed = parsePostgresUrl(s);
  if (!parsed.ok)
    ctx.addIssue({
      code: z.ZodIssueCode.custom,
      message: `${parsed.why}: use postgres://user:password@host:5432/database (a replicated one: postgres://user:password@h1:5432,h2:5432/database?target_session_attrs=read-write), or leave it empty for SQLite in the data dir`,
    });
});

/** '' (the default: file blobs in the data dir, resolved by loadConfig) or a parsed location. */
const blobsUrl = z.string().transform((url, ctx): BlobsLocation | undefined => {
  if (url === '') return undefined;
  const where = parseBlobsUrl(url);
  if (!where) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: BLOBS_URL_RULE });
    return z.NEVER;
  }
  return where;
});
const endpointUrl = z
  .string()
  .refine((s) => s === '' || /^https?:\/\/[^/]/.test(s), 'use http(s)://host:port');

/** `auto` (resolved by the worker from its data dir's file system) or a whole number of bytes. */
const cacheBytes = z.union([z.number(), z.string()]).transform((raw, ctx): number | 'auto' => {
  if (raw === 'auto') return 'auto';
  const bytes = Number(raw);
  if (String(raw).trim() !== '' && Number.isInteger(bytes) && bytes >= 0) return bytes;
  ctx.addIssue({
    code: z.ZodIssueCode.custom,
    message: 'use a whole number of bytes (e.g. 21474836480 for 20 GiB; 0 = no budget) or auto',
  });
  return z.NEVER;
});

const nodeSelector = z.string().transform((text, ctx) => {
  const selector = parseNodeSelector(text);
  if (!selector) {
    ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'use label=value pairs separated by commas' });
    return z.NEVER;
  }
  return selector;
});

export const CONFIG_OPTIONS = {
  dataDir: option({
    env: 'BERTH_DATA',
    schema: z.string().min(1),
    default: '.berth',
    unit: 'path',
    defaultDoc: '`./.berth` (resolved to an absolute path against the working directory)',
    doc: 'Where the store, workspaces, slots, sockets, the staged runner and the image cache live. See the layout in architecture.md. All workers of one install (`berth up`, `berth worker`) use the same data dir; it must be on a file system overlayfs accepts as upper layer (not itself an overlay). Its absolute path also names the install (`berth.install` label).',
  }),
  store: option({
    env: 'BERTH_STORE',
    schema: storeUrl,
    default: '',
    unit: 'empty or URL',
    doc: 'The store. Empty: SQLite at `<dataDir>/berth.db`, shared by the processes of this machine. `postgres://user:password@host:5432/database` (or `postgresql://`): that PostgreSQL database, shared by workers on any number of machines (store.md, scale-out.md); the database must exist, berth creates its tables. A replicated database with automatic failover takes several hosts, in the syntax of libpq: `postgres://user:password@h1:5432,h2:5432/database?target_session_attrs=read-write` (berth connects only to the writable primary among them and follows it; `target_session_attrs` is `read-write` by default, or `any`: store.md, *Replication and failover*). Anything else (a malformed host list, another `target_session_attrs`) fails with `CONFIG_INVALID` naming the part that is wrong (the password is never shown). An unreachable database fails start-up with `STORE_UNAVAILABLE`.',
  }),
  blobs: option({
    env: 'BERTH_BLOBS',
    schema: blobsUrl,
    default: '',
    unit: 'empty or URL',
    defaultDoc: 'empty = `file://<dataDir>/blobs`',
    doc: "The blob store holding the sessions' workspace chains (committed layers and snapshots: scale-out.md, *Workspaces across machines*) and mediated storage's contents (storage.md, *The blob store*). `file:///absolute/dir`: files under that dir of this machine. `s3://bucket` or `s3://bucket/prefix` (bucket 3–63 of `a-z 0-9 . -`; prefix segments of `A-Z a-z 0-9 . _ -`): a bucket of an S3-compatible service, shared by the workers of one install on many machines (one bucket or prefix per install: its garbage collection deletes what its store does not name); needs `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`. Anything else fails with `CONFIG_INVALID`. Checked at the start of `berth up` and `berth worker` before anything else: a missing bucket, refused keys or an unreachable endpoint fail start-up with `BLOBS_UNREACHABLE`, naming the bucket, the endpoint and the fix. Also `--blobs`.",
  }),
  s3Endpoint: option({
    env: 'AWS_ENDPOINT_URL_S3',
    schema: endpointUrl,
    default: '',
    unit: '`http(s)://host:port`',
    defaultDoc: '`AWS_ENDPOINT_URL`; empty = AWS S3 of `AWS_REGION`',
    doc: 's3 blobs: the S3 service (Ceph RGW, MinIO, SeaweedFS, …). When an endpoint is set, buckets are addressed path-style (`http://host:port/bucket/key`), as those services expect.',
  }),
  awsEndpoint: option({
    env: 'AWS_ENDPOINT_URL',
    schema: endpointUrl,
    default: '',
    unit: '`http(s)://host:port`',
    doc: 's3 blobs: the endpoint used when `AWS_ENDPOINT_URL_S3` is unset (the AWS convention for all services).',
  }),
  s3Region: option({
    env: 'AWS_REGION',
    schema: z.string().regex(/^[a-z0-9-]{1,64}$/, 'must be a region name such as us-east-1'),
    default: 'us-east-1',
    unit: 'region name',
    doc: "s3 blobs: the region requests are signed for (and AWS S3's endpoint).",
  }),
  s3AccessKeyId: option({
    env: 'AWS_ACCESS_KEY_ID',
    schema: z.string(),
    default: '',
    unit: 'string',
    doc: 's3 blobs: the access key of a user allowed to read, write, list and delete in the bucket; required with s3 blobs (`CONFIG_INVALID` without it).',
  }),
  s3SecretAccessKey: option({
    env: 'AWS_SECRET_ACCESS_KEY',
    schema: z.string(),
    default: '',
    unit: 'string',
    doc: "s3 blobs: that user's secret key; required with s3 blobs. Never logged or shown in an error.",
  }),
  apiHost: option({
    env: 'BERTH_HOST',
    schema: z.string().min(1),
    default: '127.0.0.1',
    unit: 'address',
    doc: 'Address the HTTP API listens on. An address other than loopback is refused at start until a tenant token exists (`berth token create --tenant T`).',
  }),
  apiPort: option({
    env: 'BERTH_PORT',
    schema: z.coerce.number().int().min(0).max(65535),
    default: 7420,
    unit: 'TCP port, 0–65535',
    doc: 'Port of the HTTP API; `0` picks a free port.',
  }),
  controlListen: option({
    env: 'BERTH_CONTROL_LISTEN',
    schema: z.string().regex(LISTEN_ADDRESS, 'host:port, e.g. 127.0.0.1:0 or 10.0.0.5:7430'),
    default: '127.0.0.1:0',
    unit: 'host:port',
    doc: "Where a worker serves its control endpoint, the API's door to the live sandboxes it holds (`berth exec`; docs/sandbox-api.md); its address and a key drawn at start go in the worker's row. `127.0.0.1:0` (a free port) fits one machine; with workers on several, the machine's address the API can reach.",
  }),
  apiUrl: option({
    env: 'BERTH_URL',
    schema: z.string().url().optional(),
    unit: 'URL',
    defaultDoc: '`http://<apiHost>:<apiPort>` (`127.0.0.1` when `apiHost` is `0.0.0.0`)',
    doc: 'Where CLI commands (`agent`, `send`, `status`) find the API.',
  }),
  apiToken: option({
    env: 'BERTH_TOKEN',
    schema: z.string(),
    default: '',
    unit: 'string',
    doc: 'API token CLI commands send. Empty = the admin token in `<dataDir>/admin-token` (written by `berth up`, mode 0600).',
  }),
  dockerSocket: option({
    env: 'BERTH_DOCKER_SOCKET',
    schema: z.string().min(1),
    default: '/var/run/docker.sock',
    unit: 'path',
    doc: 'Docker Engine API socket.',
  }),
  image: option({
    env: 'BERTH_IMAGE',
    schema: z.string(),
    default: '',
    unit: 'image reference',
    doc: 'Sandbox image for agents that name none. Empty = the locally built base image `berth-base:<hash>`, built at `berth up` or `berth worker` when it is missing.',
  }),
  runtime: option({
    env: 'BERTH_RUNTIME',
    schema: z.enum(['docker', 'kubernetes']),
    default: 'docker',
    unit: '`docker` | `kubernetes`',
    doc: "Where sandboxes run: containers on this machine's Docker engine, or Pods of a Kubernetes cluster on this machine's nodes (docs/kubernetes.md). Also `--runtime` on `berth up` / `berth worker`.",
  }),
  kubeconfig: option({
    env: 'BERTH_KUBECONFIG',
    schema: z.string(),
    default: '',
    unit: 'path',
    doc: 'Kubernetes: the kubeconfig file. Empty = `$KUBECONFIG`, the in-cluster service account, or `~/.kube/config`.',
  }),
  kubeNamespace: option({
    env: 'BERTH_KUBE_NAMESPACE',
    schema: z.string().regex(DNS_LABEL, 'must be a Kubernetes namespace name (a-z 0-9 -, at most 63)'),
    default: 'berth',
    unit: 'namespace name',
    doc: 'Kubernetes: where sandbox Pods are created; must exist.',
  }),
  kubeNodeSelector: option({
    env: 'BERTH_KUBE_NODE_SELECTOR',
    schema: nodeSelector,
    default: '',
    unit: '`k=v[,k=v]`',
    defaultDoc: '`kubernetes.io/hostname=<host name>`',
    doc: 'Kubernetes: node labels a sandbox Pod must land on — the nodes of this machine, whose files (workspaces, gateway sockets) its Pods mount. The DaemonSet sets `kubernetes.io/hostname=$(NODE_NAME)`.',
  }),
  kubeRuntimeClassRunsc: option({
    env: 'BERTH_KUBE_RUNTIME_CLASS_RUNSC',
    schema: z.string().regex(DNS_LABEL, 'must be a RuntimeClass name (a-z 0-9 -, at most 63)'),
    default: 'gvisor',
    unit: 'RuntimeClass name',
    doc: 'Kubernetes: the RuntimeClass of agents with `isolation: runsc`.',
  }),
  slots: option({
    env: 'BERTH_SLOTS',
    schema: z.coerce.number().int().min(0).optional(),
    unit: 'count, ≥ 0',
    defaultDoc: '`max(1, min(2 × CPUs, floor(memory / 1 GiB)))`',
    doc: 'Sessions one worker serves at the same time. Further runnable sessions wait in the queue. `0` = this process claims no session (`berth up --slots 0`: the API only, with `berth worker`s doing the work); its worker still sweeps leases and cleans up.',
  }),
  warmPool: option({
    env: 'BERTH_WARM_POOL',
    schema: z.coerce.number().int().min(0).max(1000),
    default: 2,
    unit: 'count, 0–1000',
    doc: 'Most warm sandboxes (created, started, runner booted, bound to no session) a worker keeps per profile (image + memory + CPUs + pids limit). The target adapts below it: the takes of the last minute, at least `warmPoolMin` for the default profile and for any profile used in the last 10 minutes. Binding a session to a warm sandbox costs no engine call. `0` = every sandbox starts cold.',
  }),
  warmPoolMin: option({
    env: 'BERTH_WARM_POOL_MIN',
    schema: z.coerce.number().int().min(0).max(1000),
    default: 1,
    unit: 'count, 0–1000',
    doc: 'The floor of the adaptive target, per profile in use (capped by `warmPool`). Set it equal to `warmPool` to hold a fixed number warm whatever the demand.',
  }),
  leaseMs: option({
    env: 'BERTH_LEASE',
    schema: durationMs.pipe(z.number().min(500, 'must be at least 500ms')),
    default: '10s',
    unit: 'duration, ≥ 500 ms',
    doc: "Worker liveness lease. The worker renews its row every `leaseMs / 5` (each renewal due that long after the previous one was sent, on a store connection of its own); as often, on a timer of its own, it sweeps expired leases (and cleans up local leftovers every 5th time); a row older than `leaseMs` is dead and its sessions are reclaimed; a worker whose last renewal is `0.4 × leaseMs` old claims no new session, and at `0.6 × leaseMs` old stops its own sandboxes (self-fencing); rows dead for `10 × leaseMs` and holding no lease are deleted. Also the claim loop's polling floor (`leaseMs / 5`) for messages posted through another process.",
  }),
  heartbeatIntervalMs: option({
    env: 'BERTH_HEARTBEAT_INTERVAL',
    schema: durationMs.pipe(z.number().min(50, 'must be at least 50ms')),
    default: '2s',
    unit: 'duration, ≥ 50 ms',
    doc: "How often the runner heartbeats its gateway: from the container's environment (`BERTH_HEARTBEAT_MS`) before its first turn, from the turn assignment after.",
  }),
  heartbeatTimeoutMs: option({
    env: 'BERTH_HEARTBEAT_TIMEOUT',
    schema: durationMs,
    default: '30s',
    unit: 'duration, > interval',
    doc: 'No heartbeat for this long: the worker kills the sandbox and aborts its turn.',
  }),
  idleTimeoutMs: option({
    env: 'BERTH_IDLE_TIMEOUT',
    schema: durationMs,
    default: '30s',
    unit: 'duration',
    doc: "A sandbox with no runnable message for this long is killed and the session released. `0` = a fresh sandbox for every turn. An idle sandbox also gives its slot up at once when all of its worker's slots are busy and more sessions are queued than that worker's idle sandboxes already giving theirs up (checked when the supervisor wakes: at once for messages posted in the same process, at its next health check otherwise).",
  }),
  turnTimeoutMs: option({
    env: 'BERTH_TURN_TIMEOUT',
    schema: durationMs.pipe(z.number().min(1000, 'must be at least 1s')),
    default: '10m',
    unit: 'duration, ≥ 1 s',
    doc: 'A turn running longer than this is aborted and its sandbox killed.',
  }),
  drainGraceMs: option({
    env: 'BERTH_DRAIN_GRACE',
    schema: durationMs,
    default: '30s',
    unit: 'duration',
    doc: 'On SIGTERM (a deploy, a scale-down, `kubectl drain`) the worker drains: it claims nothing more, hands idle sessions back, and lets running turns end by themselves for this long; a turn still running then is retried at once elsewhere, no try spent. A second SIGTERM or Ctrl-C stops at once. Keep Kubernetes `terminationGracePeriodSeconds` above it.',
  }),
  retryBaseMs: option({
    env: 'BERTH_RETRY_BASE',
    schema: durationMs,
    default: '1s',
    unit: 'duration',
    doc: "Backoff after a message's n-th failed try is `retryBaseMs × 2^(n-1)`, capped by `retryMaxMs`; a try lost with its sandbox (`SANDBOX_EXITED`) is retried at once the first time, and counts one failure fewer after it.",
  }),
  retryMaxMs: option({
    env: 'BERTH_RETRY_MAX',
    schema: durationMs,
    default: '60s',
    unit: 'duration',
    doc: 'Cap of that backoff.',
  }),
  maxTries: option({
    env: 'BERTH_MAX_TRIES',
    schema: positiveInt,
    default: 5,
    unit: 'count, ≥ 1',
    doc: 'Tries of a message before it is `failed` (and a `failed` event is sent).',
  }),
  webhookMaxAttempts: option({
    env: 'BERTH_WEBHOOK_MAX_ATTEMPTS',
    schema: positiveInt,
    default: 8,
    unit: 'count, ≥ 1',
    doc: 'Attempts of one webhook delivery before it becomes a dead letter (kept, and sent again on `POST /v1/webhooks/:id/deliveries/:d/retry`).',
  }),
  webhookRetryBaseMs: option({
    env: 'BERTH_WEBHOOK_RETRY_BASE',
    schema: durationMs,
    default: '1s',
    unit: 'duration',
    doc: 'Backoff after failed attempt n is `base × 2^(n-1)`, capped by `webhookRetryMaxMs`.',
  }),
  webhookRetryMaxMs: option({
    env: 'BERTH_WEBHOOK_RETRY_MAX',
    schema: durationMs,
    default: '5m',
    unit: 'duration',
    doc: 'Cap of that backoff.',
  }),
  webhookTimeoutMs: option({
    env: 'BERTH_WEBHOOK_TIMEOUT',
    schema: durationMs.pipe(z.number().min(100, 'must be at least 100ms')),
    default: '10s',
    unit: 'duration, ≥ 100 ms',
    doc: 'A receiver that has not answered by then: failed attempt.',
  }),
  telegramApiUrl: option({
    env: 'BERTH_TELEGRAM_API_URL',
    schema: z.string().url(),
    default: 'https://api.telegram.org',
    unit: 'URL',
    doc: "Where Telegram channels reach the Bot API (`<url>/bot<token>/<method>`): Telegram's own, a self-hosted Bot API server, or a test's fake (docs/channels.md).",
  }),
  slackApiUrl: option({
    env: 'BERTH_SLACK_API_URL',
    schema: z.string().url(),
    default: 'https://slack.com/api',
    unit: 'URL',
    doc: "Where Slack channels reach the Web API (`<url>/<method>`, e.g. chat.postMessage): Slack's own, or a test's fake (docs/channels.md).",
  }),
  discordApiUrl: option({
    env: 'BERTH_DISCORD_API_URL',
    schema: z.string().url(),
    default: 'https://discord.com/api/v10',
    unit: 'URL',
    doc: "Where Discord channels reach the REST API (`<url>/channels/{id}/messages`; the Gateway's URL comes from `<url>/gateway/bot`): Discord's own, or a test's fake (docs/channels.md).",
  }),
  channelPollTimeoutMs: option({
    env: 'BERTH_CHANNEL_POLL_TIMEOUT',
    schema: durationMs.pipe(z.number().min(0)),
    default: '25s',
    unit: 'duration (whole seconds are sent)',
    doc: "How long one long poll of a channel's platform waits for an update at most (Telegram's getUpdates `timeout`); a poll also ends a second before the process's lease on the channel does (`BERTH_LEASE`), and waits at least 1 s.",
  }),
  maxMessageBytes: option({
    env: 'BERTH_MAX_MESSAGE_BYTES',
    schema: positiveInt,
    default: 256 * 1024,
    unit: 'bytes, ≥ 1',
    doc: 'Largest inbound message text (UTF-8). The HTTP body limit is `2 × maxMessageBytes + 64 KiB`.',
  }),
  maxOutputBytes: option({
    env: 'BERTH_MAX_OUTPUT_BYTES',
    schema: positiveInt,
    default: 64 * 1024,
    unit: 'bytes, ≥ 1',
    doc: 'a job (command message or script `run` step) writing more than this to stdout or to stderr is killed with its process group and fails the turn with `OUTPUT_LIMIT_EXCEEDED` (not retried). The gateway accepts request bodies up to `4 × maxOutputBytes + 1 MiB`.',
  }),
  snapshotEveryLayers: option({
    env: 'BERTH_SNAPSHOT_LAYERS',
    schema: positiveInt,
    default: 32,
    unit: 'layers, ≥ 1',
    doc: "A session's workspace chain is compacted into a snapshot (the whole committed tree as one object) once this many layers follow its newest snapshot, so materialising it on a machine that does not hold it downloads one snapshot and a few layers, not its whole history (scale-out.md, *Workspaces across machines*).",
  }),
  snapshotEveryBytes: option({
    env: 'BERTH_SNAPSHOT_BYTES',
    schema: positiveInt,
    default: 64 * 1024 ** 2,
    unit: 'bytes, ≥ 1',
    doc: 'The chain is also compacted once the layers after its newest snapshot add up to this many bytes.',
  }),
  cacheBytes: option({
    env: 'BERTH_CACHE_BYTES',
    schema: cacheBytes,
    default: 'auto',
    unit: 'bytes, ≥ 0, or `auto`',
    defaultDoc: "`auto`: half the size of the data dir's file system",
    doc: "Byte budget of the sessions' workspace copies on the data dir (their committed trees, attempt layers and archives in flight; `berth up --cache-bytes`). Past it, the least recently used copy no process uses (not bound to a sandbox, no turn running, not a resident agent's) is evicted; its next turn materialises it from the chain (scale-out.md, *Bounded disks*). Every worker sharing the data dir enforces it over the whole dir. `0` = no budget: every copy is kept.",
  }),
  storageMaxObjectBytes: option({
    env: 'BERTH_STORAGE_MAX_OBJECT_BYTES',
    schema: positiveInt,
    default: 1024 ** 3,
    unit: 'bytes, ≥ 1',
    doc: "Largest object a sandbox may put in mediated storage (storage.md); a larger body is refused with `STORAGE_OBJECT_TOO_LARGE` and nothing is stored. Storage bodies stream and do not count against the gateway's JSON body limit.",
  }),
  mountAllowlistFile: option({
    env: 'BERTH_MOUNT_ALLOWLIST',
    schema: z.string().min(1).optional(),
    unit: 'path',
    defaultDoc: '`~/.config/berth/mount-allowlist.json` (`$HOME` of the process)',
    doc: "The host's mount allowlist for agents' extra read-only mounts (security.md, *Extra mounts*). Read at each agent create and each sandbox start, so edits apply without a restart. No file = no extra mounts. Keep it outside any repository an agent could change.",
  }),
  egressCaFile: option({
    env: 'BERTH_EGRESS_CA_FILE',
    schema: z.string(),
    default: '',
    unit: 'path',
    doc: "Extra CA certificates (PEM) the gateway trusts, besides Node's roots, for the upstream TLS of egress targets with header rules: for private servers with their own CA. Read at start; unreadable or no certificate = `CONFIG_INVALID`. The egress CA the *sandbox* trusts is separate: `<data>/egress-ca/` (security.md, *Header rules*).",
  }),
  secretKey: option({
    env: 'BERTH_SECRET_KEY',
    schema: z.string(),
    default: '',
    unit: 'any string',
    doc: 'Encrypts the secret store (`<data>/secrets.json`) at rest: AES-256-GCM with a key derived by scrypt from this value. Use the same value for every berth process and `berth secret` command on the data dir; an encrypted store without it is refused (`SECRET_STORE_LOCKED`). Never logged. Empty = values stored unencrypted (file mode 0600).',
  }),
  anthropicBaseUrl: option({
    env: 'ANTHROPIC_BASE_URL',
    schema: z.string().url(),
    default: 'https://api.anthropic.com',
    unit: 'URL',
    doc: "Upstream of the gateway's Anthropic model proxy, for agents that set no `baseUrl` (the same variable the official SDK reads).",
  }),
  openaiBaseUrl: option({
    env: 'OPENAI_BASE_URL',
    schema: z.string().url(),
    default: 'https://api.openai.com/v1',
    unit: "URL, with the API's `/v1`",
    doc: "Upstream of the gateway's OpenAI-compatible model proxy (vLLM, Ollama, llama.cpp server: e.g. `http://127.0.0.1:11434/v1`), for agents that set no `baseUrl`.",
  }),
  logLevel: option({
    env: 'BERTH_LOG_LEVEL',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
    unit: '`fatal` `error` `warn` `info` `debug` `trace` `silent`',
    doc: 'pino log level of `berth up` and `berth worker` (logs go to stderr). `berth demo` always logs at `warn`.',
  }),
};

export type ConfigOptions = typeof CONFIG_OPTIONS;
export type ConfigKey = keyof ConfigOptions;

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

export function parseDurationMs(text: string): number | undefined {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(text);
  if (!m) return undefined;
  const unit = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms' | 's' | 'm' | 'h'];
  return Math.round(Number(m[1]) * unit);
}

const TABLE_HEADER = '| option (`ResolvedConfig`) | environment variable | unit | default | meaning |';

/** docs/config.md with its option table rendered from CONFIG_OPTIONS (the rest of the text as it is). */
export function withConfigOptionsTable(doc: string): string {
  const start = doc.indexOf(TABLE_HEADER);
  if (start < 0) throw new Error('docs/config.md has no option table to replace');
  const end = doc.indexOf('\n\n', start);
  return doc.slice(0, start) + configOptionsTable() + (end < 0 ? '\n' : doc.slice(end));
}

/** The option table of docs/config.md, as CONFIG_OPTIONS declares it. */
export function configOptionsTable(): string {
  const rows = Object.entries(CONFIG_OPTIONS).map(([key, o]: [string, ConfigOption<z.ZodTypeAny>]) =>
    [`\`${key}\``, `\`${o.env}\``, o.unit, o.defaultDoc ?? defaultText(o), o.doc].map(cell).join(' | '),
  );
  return [TABLE_HEADER, '|---|---|---|---|---|', ...rows.map((r) => `| ${r} |`)].join('\n');
}

/** A default as the doc shows it: empty, a size with its binary unit, or the value as written. */
function defaultText(o: ConfigOption<z.ZodTypeAny>): string {
  if (o.default === '') return 'empty';
  if (typeof o.default === 'number' && o.unit.startsWith('bytes')) {
    const unit = [
      [2 ** 30, 'GiB'],
      [2 ** 20, 'MiB'],
      [2 ** 10, 'KiB'],
    ].find(([size]) => o.default % (size as number) === 0);
    return unit ? `\`${o.default}\` (${o.default / (unit[0] as number)} ${unit[1]})` : `\`${o.default}\``;
  }
  return `\`${String(o.default)}\``;
}

/** A table cell: a pipe in the text would end it. */
function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}
