/**
 * An agent is a named configuration shared by many sessions. Validated here once, at
 * the API boundary; the store keeps the resolved form.
 */
import { z } from 'zod';

export const PROVIDERS = ['command', 'script'] as const;
export type ProviderName = (typeof PROVIDERS)[number];

export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/** Where an agent's extra read-only data mounts appear inside the sandbox: /data/<containerPath>. */
export const MOUNTS_ROOT = '/data';

/** Relative, no `..` or `.` segment, no `:` (Docker's separator), no empty segment. */
const containerPath = z
  .string()
  .min(1)
  .max(255)
  .regex(
    /^(?!\.{1,2}(?:\/|$))(?!.*\/\.{1,2}(?:\/|$))[A-Za-z0-9_.-]+(?:\/[A-Za-z0-9_.-]+)*$/,
    'containerPath: relative, segments of A-Z a-z 0-9 _ - . (no "..", no ":", no leading "/")',
  );

export const agentMountSchema = z
  .object({
    /** Absolute host directory; must resolve under a root of the host's mount allowlist. */
    hostPath: z.string().min(1).max(4096),
    /** Appears read-only at /data/<containerPath>. */
    containerPath,
  })
  .strict();
export type AgentMount = z.output<typeof agentMountSchema>;

export const agentSpecSchema = z
  .object({
    name: z.string().regex(NAME_PATTERN, 'name: 1-64 of A-Z a-z 0-9 _ - . starting with a letter or digit'),
    provider: z.enum(PROVIDERS),
    /** Sandbox image; empty = the host's base image. */
    image: z.string().max(256).optional(),
    /** @default 512 */
    memoryMb: z
      .number()
      .int()
      .min(16)
      .max(1 << 20)
      .default(512),
    /** @default 1 */
    cpus: z.number().positive().max(256).default(1),
    /** @default 256 */
    pidsLimit: z
      .number()
      .int()
      .min(16)
      .max(1 << 16)
      .default(256),
    /** Per-session workspace quota (committed files + a turn's writes), MiB; also the largest file a job may write. @default 1024 */
    workspaceMb: z
      .number()
      .int()
      .min(1)
      .max(1 << 24)
      .default(1024),
    /** Extra read-only data mounts, checked against the mount allowlist at create and at each sandbox start. @default [] */
    mounts: z.array(agentMountSchema).max(16).default([]),
    instructions: z
      .string()
      .max(64 * 1024)
      .optional(),
  })
  .strict();

export type AgentSpecInput = z.input<typeof agentSpecSchema>;
export type AgentSpec = z.output<typeof agentSpecSchema>;
