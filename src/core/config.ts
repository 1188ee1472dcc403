/**
 * The one config loader. `loadConfig(env, overrides)` validates every input once and
 * returns a frozen ResolvedConfig with defaults applied and durations in ms. Nothing
 * else in berth reads process.env, and nothing reads config at import time.
 */
import { cpus, homedir, hostname, totalmem } from 'node:os';
import { join, resolve } from 'node:path';
import { z } from 'zod';
import type { BlobsConfig } from './blobs-url.js';
import { CONFIG_OPTIONS, type ConfigKey, type ConfigOption, type ConfigOptions } from './config-options.js';
import { BerthError } from './errors.js';

/**
 * What loadConfig returns: every option of CONFIG_OPTIONS (config-options.ts, where each is
 * documented), validated, defaulted and resolved (durations in ms, paths absolute).
 */
export type ResolvedConfig = {
  readonly [K in ConfigKey]: NonNullable<z.output<ConfigOptions[K]['schema']>>;
};

const schema = z.object(
  Object.fromEntries(Object.entries(CONFIG_OPTIONS).map(([key, o]) => [key, o.schema])) as {
    [K in ConfigKey]: ConfigOptions[K]['schema'];
  },
);

type Input = z.input<typeof schema>;

/** Validates env (then overrides, e.g. CLI flags) over the defaults. Throws CONFIG_INVALID naming the variable. */
export function loadConfig(
  env: Record<string, string | undefined>,
  overrides: Partial<Record<keyof Input, string | number>> = {},
): ResolvedConfig {
  const raw: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(CONFIG_OPTIONS) as [ConfigKey, ConfigOption<z.ZodTypeAny>][]) {
    if (o.default !== undefined) raw[key] = o.default;
    const value = env[o.env];
    if (value !== undefined && value !== '') raw[key] = value;
  }
  for (const [key, value] of Object.entries(overrides)) if (value !== undefined) raw[key] = value;
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const key = String(issue.path[0]) as keyof Input;
    throw new BerthError(
      'CONFIG_INVALID',
      `Invalid ${CONFIG_OPTIONS[key]?.env ?? key}=${JSON.stringify(shownValue(key, raw[key]))}: ${issue.message}`,
    );
  }
  const c = parsed.data;
  if (c.heartbeatTimeoutMs <= c.heartbeatIntervalMs) {
    throw new BerthError(
      'CONFIG_INVALID',
      `BERTH_HEARTBEAT_TIMEOUT (${c.heartbeatTimeoutMs} ms) must exceed BERTH_HEARTBEAT_INTERVAL (${c.heartbeatIntervalMs} ms)`,
    );
  }
  if (c.blobs?.kind === 's3' && (c.s3AccessKeyId === '' || c.s3SecretAccessKey === ''))
    throw new BerthError(
      'CONFIG_INVALID',
      `BERTH_BLOBS=${String(raw.blobs)} needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the S3 service's keys)`,
    );
  const dataDir = resolve(c.dataDir);
  return Object.freeze({
    ...c,
    dataDir,
    blobs: Object.freeze(c.blobs ?? { kind: 'file' as const, dir: join(dataDir, 'blobs') }),
    s3Endpoint: (c.s3Endpoint || c.awsEndpoint).replace(/\/+$/, ''),
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

/** The blob store to open: the location of BERTH_BLOBS, with the S3 service's endpoint, region and keys for s3. */
export function blobsConfigOf(c: ResolvedConfig): BlobsConfig {
  if (c.blobs.kind === 'file') return c.blobs;
  return {
    ...c.blobs,
    endpoint: c.s3Endpoint,
    region: c.s3Region,
    accessKeyId: c.s3AccessKeyId,
    secretAccessKey: c.s3SecretAccessKey,
  };
}

/** A value as an error message may show it: no password, no secret key. */
function shownValue(key: string, value: unknown): unknown {
  if (key === 's3SecretAccessKey') return '***';
  return key === 'store' ? redactUrl(String(value)) : value;
}

/** A URL without its password (user:***@), for messages and logs. */
export function redactUrl(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, '$1:***@');
}

/** Two sessions per core, but never more than one per GiB of memory. */
export function defaultSlots(cpuCount: number, memoryBytes: number): number {
  return Math.max(1, Math.min(2 * cpuCount, Math.floor(memoryBytes / 2 ** 30)));
}
