/**
 * An agent is a named configuration shared by many sessions. Validated here once, at
 * the API boundary; the store keeps the resolved form.
 */
import { z } from 'zod';
import { egressSchema } from './egress.js';
import { BerthError } from './errors.js';
import { NAME_PATTERN } from './names.js';
import { agentPackagesSchema } from './packages.js';

export { NAME_PATTERN };

/** Agent harnesses run unchanged in the sandbox: Claude Code, Codex, opencode (docs/model-agents.md). */
export const HARNESS_PROVIDERS = ['claude-code', 'codex', 'opencode'] as const;
export type HarnessName = (typeof HARNESS_PROVIDERS)[number];
export const PROVIDERS = ['command', 'script', 'anthropic', 'openai', ...HARNESS_PROVIDERS] as const;
/** Providers whose turns are berth's own model tool-use loops through the gateway's model proxy. */
export const MODEL_PROVIDERS = ['anthropic', 'openai'] as const;
/** The model APIs the gateway's model proxy serves (its `/v1/model/<api>/…` routes). */
export type ModelProviderName = (typeof MODEL_PROVIDERS)[number];
/** The model API each harness speaks through the model proxy. */
export const HARNESS_MODEL_API: Record<HarnessName, ModelProviderName> = {
  'claude-code': 'anthropic',
  codex: 'openai',
  opencode: 'anthropic',
};

export function isHarness(provider: string): provider is HarnessName {
  return (HARNESS_PROVIDERS as readonly string[]).includes(provider);
}

/** The model API a provider's turns call (a model loop's own, a harness's), or null for command/script. */
export function modelApiOf(provider: string): ModelProviderName | null {
  if ((MODEL_PROVIDERS as readonly string[]).includes(provider)) return provider as ModelProviderName;
  return isHarness(provider) ? HARNESS_MODEL_API[provider] : null;
}
/** Isolation tiers (docs/isolation.md): runc = Docker's default runtime; runsc = gVisor, a user-space kernel. */
export const ISOLATION_TIERS = ['runc', 'runsc'] as const;
export type IsolationTier = (typeof ISOLATION_TIERS)[number];
export type ProviderName = (typeof PROVIDERS)[number];

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
    /** runsc: the sandbox runs under gVisor, with a fresh sandbox for every turn. @default runc */
    isolation: z.enum(ISOLATION_TIERS).default('runc'),
    /** Sandbox image; empty = the host's base image, or the agent image its harness and packages need. */
    image: z.string().max(256).optional(),
    /**
     * Packages built into the agent's image (berth image build --agent NAME): Debian packages
     * by name, npm packages at an exact version (name@1.2.3).
     */
    packages: agentPackagesSchema.optional(),
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
    /**
     * Targets the sandbox may reach through the gateway's proxy: "host:port", or
     * {target, headers} whose header rules (with {{secret:NAME}}) the gateway sets on every
     * request to that target. Empty = no egress at all. @default []
     */
    egress: egressSchema.default([]),
    /**
     * ephemeral: a sandbox serves a session until it idles out, every turn works in its own
     * transactional layer and no process outlives its turn. resident: one sandbox per
     * session across turns and idle periods, processes persist, the workspace is written
     * in place (durable data belongs in state or storage); recycled by `recycle`. @default ephemeral
     */
    mode: z.enum(['ephemeral', 'resident']).default('ephemeral'),
    /** When a resident sandbox is replaced, between turns (docs/resident.md). Unset limits do not apply. */
    recycle: z
      .object({
        /** Age of the sandbox, ms. */
        maxAgeMs: z.number().int().min(1000).optional(),
        /** Resident set of all its processes, MiB. */
        maxRssMb: z.number().int().min(1).optional(),
        /** Open file descriptors of all its processes. */
        maxOpenFiles: z.number().int().min(1).optional(),
      })
      .strict()
      .optional(),
    /** Extra read-only data mounts, checked against the mount allowlist at create and at each sandbox start. @default [] */
    mounts: z.array(agentMountSchema).max(16).default([]),
    instructions: z
      .string()
      .max(64 * 1024)
      .optional(),
    // Model agents (anthropic, openai). Defaults: MODEL_DEFAULTS.
    /** The upstream model name, e.g. claude-sonnet-4-5 or gpt-4.1; required for anthropic and openai. */
    model: z.string().min(1).max(200).optional(),
    /**
     * Harnesses: a host directory with the agent's instruction files (CLAUDE.md, AGENTS.md) and
     * `skills/`, checked against the mount allowlist and mounted read-only; the runner composes
     * them into the harness's own config dir each turn.
     */
    configDir: z.string().min(1).max(4096).optional(),
    /** Harnesses: how long one run of the harness may take before it is killed (HARNESS_TIMEOUT), ms. @default 600000 */
    harnessTimeoutMs: z
      .number()
      .int()
      .min(1000)
      .max(24 * 3_600_000)
      .optional(),
    /** Upstream base URL for this agent; unset = the host's ANTHROPIC_BASE_URL / OPENAI_BASE_URL. */
    baseUrl: z.string().url().max(2048).optional(),
    /** Host secret holding the provider key. @default the provider's name ('anthropic' or 'openai') */
    secret: z.string().regex(NAME_PATTERN, 'secret: a secret name').optional(),
    /** Largest reply of one model call, in tokens. @default 4096 */
    maxTokens: z.number().int().min(1).max(1_000_000).optional(),
    /** Model calls one turn may make before it fails. @default 50 */
    maxSteps: z.number().int().min(1).max(1000).optional(),
    /** Time limit of one bash tool call, in ms. @default 120000 */
    toolTimeoutMs: z.number().int().min(100).max(3_600_000).optional(),
    /** Live schedules the agent's turns may make (schedule_message tool), over all its sessions. @default 5 */
    maxSchedules: z.number().int().min(0).max(1000).optional(),
    /**
     * Which versions of a session's workspace compaction keeps for history, rewind and fork
     * (docs/storage.md, *Retention*): the last `versions`, every version made in the last
     * `days`, or `all` of them; at most one. Unset: only the versions since the newest
     * snapshot (compaction drops the rest).
     */
    retention: z
      .object({
        /** The last K versions, the current one included. */
        versions: z.number().int().min(1).max(1_000_000).optional(),
        /** Every version made in the last N days. */
        days: z.number().positive().max(36_500).optional(),
        /** Every version, for the session's life. */
        all: z.literal(true).optional(),
      })
      .strict()
      .optional(),
    /** Model budget over a sliding hour, enforced by the gateway; unset = unlimited. */
    budget: z
      .object({
        tokensPerHour: z.number().int().positive().optional(),
        turnsPerHour: z.number().int().positive().optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export const MODEL_DEFAULTS = {
  maxTokens: 4096,
  maxSteps: 50,
  toolTimeoutMs: 120_000,
  harnessTimeoutMs: 600_000,
} as const;

/** Where an agent's configDir appears in its sandboxes (under MOUNTS_ROOT). */
export const AGENT_CONFIG_MOUNT = 'agent-config';

/** One thing wrong with an agent: where (a path in the spec, e.g. `egress[1]`), what, and the fix. */
export interface AgentIssue {
  path: string;
  message: string;
  fix: string;
}

/**
 * Cross-field rules of agents, checked where agents are created or changed (kept out of
 * the schema so that it stays an object other schemas can derive from).
 */
export function agentCrossFieldIssues(spec: {
  provider: string;
  model?: string;
  mode?: string;
  recycle?: object;
  configDir?: string;
  retention?: { versions?: number; days?: number; all?: true };
}): AgentIssue[] {
  const issues: AgentIssue[] = [];
  if (spec.configDir && !isHarness(spec.provider))
    issues.push({
      path: 'configDir',
      message: `only a harness (${HARNESS_PROVIDERS.join(', ')}) reads instruction files and skills from it`,
      fix: 'drop configDir, or use a harness provider',
    });
  if (modelApiOf(spec.provider) && !spec.model)
    issues.push({
      path: 'model',
      message: `provider ${spec.provider} needs a model name (e.g. "model": "claude-sonnet-4-5")`,
      fix: 'set model',
    });
  if (spec.recycle && spec.mode !== 'resident')
    issues.push({
      path: 'recycle',
      message: 'only a resident agent keeps a sandbox to recycle (set "mode": "resident", or drop "recycle")',
      fix: 'set mode: resident, or drop recycle',
    });
  if (spec.retention) {
    const set = (['versions', 'days', 'all'] as const).filter((k) => spec.retention![k] !== undefined);
    if (set.length !== 1)
      issues.push({
        path: 'retention',
        message: `name one policy: versions (the last K), days (every version of the last N days) or all; ${set.length === 0 ? 'none was' : `${set.join(' and ')} were`} given`,
        fix: 'keep exactly one of retention.versions, retention.days, retention.all',
      });
    if (spec.mode === 'resident')
      issues.push({
        path: 'retention',
        message: 'a resident agent writes its workspace in place and keeps no versions',
        fix: 'drop retention, or set mode: ephemeral',
      });
  }
  return issues;
}

/** The first cross-field issue as INVALID_INPUT (the API's check at create and update). */
export function assertAgentCrossFields(spec: Parameters<typeof agentCrossFieldIssues>[0]): void {
  const [issue] = agentCrossFieldIssues(spec);
  if (issue) throw new BerthError('INVALID_INPUT', `Invalid agent: ${issue.path}: ${issue.message}`);
}

/** What an agent's image holds beyond the base image. */
export interface AgentImageNeeds {
  harnesses: HarnessName[];
  apt: string[];
  npm: string[];
}

/**
 * What an agent's image must hold beyond the base: its provider's harness and its packages;
 * null when the base image serves it (no harness, no packages).
 */
export function agentImageNeeds(spec: {
  provider: string;
  packages?: { apt?: string[]; npm?: string[] };
}): AgentImageNeeds | null {
  const needs = {
    harnesses: isHarness(spec.provider) ? [spec.provider] : [],
    apt: [...new Set(spec.packages?.apt ?? [])].sort(),
    npm: [...new Set(spec.packages?.npm ?? [])].sort(),
  };
  return needs.harnesses.length + needs.apt.length + needs.npm.length > 0 ? needs : null;
}

export type AgentSpecInput = z.input<typeof agentSpecSchema>;
export type AgentSpec = z.output<typeof agentSpecSchema>;
