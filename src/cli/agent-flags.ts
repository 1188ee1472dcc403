/**
 * The flags of `berth agent create|update`: one per agent field, each help line stating the
 * field's default and limits as the schema has them (agentFieldLimits). The flags only
 * shape the spec; the API validates it, so a bad value gets the same error as over HTTP.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import {
  agentFieldLimits,
  BerthError,
  EGRESS_RULE_LIMITS,
  type EgressEntry,
  ISOLATION_TIERS,
  MOUNTS_ROOT,
  PROVIDERS,
} from '../core/index.js';
import { commaList } from './comma-list.js';

type Kind = 'string' | 'integer' | 'number';

/** A flag that sets one field (a dotted path for nested ones: recycle.maxAgeMs). */
interface FieldFlag {
  flags: string;
  field: string;
  kind: Kind;
  what: string;
}

const FIELD_FLAGS: FieldFlag[] = [
  {
    flags: '--image <image>',
    field: 'image',
    kind: 'string',
    what: 'sandbox image (default: the base image, or for a harness or packages the agent image `berth image build --agent NAME` builds)',
  },
  { flags: '--memory <mb>', field: 'memoryMb', kind: 'integer', what: 'memory limit, MiB' },
  { flags: '--cpus <n>', field: 'cpus', kind: 'number', what: 'CPU limit' },
  { flags: '--pids <n>', field: 'pidsLimit', kind: 'integer', what: 'process limit' },
  {
    flags: '--workspace-mb <mb>',
    field: 'workspaceMb',
    kind: 'integer',
    what: "each session's workspace quota, MiB (also the largest file a job may write)",
  },
  {
    flags: '--recycle-max-age <ms>',
    field: 'recycle.maxAgeMs',
    kind: 'integer',
    what: 'resident: replace the sandbox between turns once it is this old, ms (unset: never)',
  },
  {
    flags: '--recycle-max-rss <mb>',
    field: 'recycle.maxRssMb',
    kind: 'integer',
    what: 'resident: replace the sandbox between turns once its processes hold this much memory, MiB (unset: never)',
  },
  {
    flags: '--recycle-max-open-files <n>',
    field: 'recycle.maxOpenFiles',
    kind: 'integer',
    what: 'resident: replace the sandbox between turns once its processes hold this many open files (unset: never)',
  },
  { flags: '--model <name>', field: 'model', kind: 'string', what: 'model loops and harnesses: the model' },
  {
    flags: '--instructions <text>',
    field: 'instructions',
    kind: 'string',
    what: 'system instructions (AGENT.md in the workspace is appended)',
  },
  {
    flags: '--config-dir <dir>',
    field: 'configDir',
    kind: 'string',
    what: 'harnesses: host dir with CLAUDE.md / AGENTS.md and skills/, mounted read-only (mount allowlist)',
  },
  {
    flags: '--harness-timeout <ms>',
    field: 'harnessTimeoutMs',
    kind: 'integer',
    what: 'harnesses: time limit of one harness run, ms',
  },
  {
    flags: '--base-url <url>',
    field: 'baseUrl',
    kind: 'string',
    what: 'model upstream base URL (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL on the host)',
  },
  {
    flags: '--secret <name>',
    field: 'secret',
    kind: 'string',
    what: 'host secret holding the model key (default: the provider name)',
  },
  {
    flags: '--max-tokens <n>',
    field: 'maxTokens',
    kind: 'integer',
    what: 'anthropic/openai: largest reply of one model call, tokens',
  },
  {
    flags: '--max-steps <n>',
    field: 'maxSteps',
    kind: 'integer',
    what: 'anthropic/openai: model calls one turn may make',
  },
  {
    flags: '--tool-timeout <ms>',
    field: 'toolTimeoutMs',
    kind: 'integer',
    what: 'anthropic/openai: time limit of one bash tool call, ms',
  },
  {
    flags: '--max-schedules <n>',
    field: 'maxSchedules',
    kind: 'integer',
    what: "live schedules the agent's turns may make",
  },
  {
    flags: '--keep-versions <n>',
    field: 'retention.versions',
    kind: 'integer',
    what: "retention: keep the last N versions of each session's workspace for history, rewind and fork (default: those since the newest snapshot)",
  },
  {
    flags: '--keep-days <n>',
    field: 'retention.days',
    kind: 'number',
    what: "retention: keep every version of each session's workspace made in the last N days",
  },
  {
    flags: '--tokens-per-hour <n>',
    field: 'budget.tokensPerHour',
    kind: 'integer',
    what: 'model token budget per sliding hour (unset: unlimited)',
  },
  {
    flags: '--turns-per-hour <n>',
    field: 'budget.turnsPerHour',
    kind: 'integer',
    what: 'model turn budget per sliding hour (unset: unlimited)',
  },
];

function parseNumber(kind: Kind) {
  return (value: string): number => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n)) throw new InvalidArgumentError('not a number');
    if (kind === 'integer' && !Number.isInteger(n)) throw new InvalidArgumentError('not a whole number');
    return n;
  };
}

function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

function help(what: string, field: string): string {
  const limits = agentFieldLimits(field);
  return limits ? `${what} (${limits})` : what;
}

/** Adds one flag per agent field; `--provider` is mandatory for create. */
export function addAgentFlags(cmd: Command, mode: 'create' | 'update'): Command {
  const provider = new Option('--provider <provider>', 'what runs a message').choices(PROVIDERS);
  cmd.addOption(mode === 'create' ? provider.makeOptionMandatory() : provider);
  cmd.addOption(
    new Option(
      '--isolation <tier>',
      help('runc: Docker default; runsc: gVisor, a fresh sandbox per turn', 'isolation'),
    ).choices(ISOLATION_TIERS),
  );
  cmd.addOption(
    new Option(
      '--mode <mode>',
      help('ephemeral, or resident: one sandbox per session across turns', 'mode'),
    ).choices(['ephemeral', 'resident']),
  );
  cmd.addOption(new Option('--resident', 'same as --mode resident').conflicts('mode'));
  cmd.addOption(
    new Option(
      '--keep-all',
      "retention: keep every version of each session's workspace (its blob-store bytes grow with every turn)",
    ).conflicts(['keepVersions', 'keepDays']),
  );
  cmd.option(
    '--apt <packages>',
    help("Debian packages in the agent's image (comma-separated)", 'packages.apt'),
  );
  cmd.option(
    '--npm <packages>',
    help(
      "npm packages in the agent's image, at exact versions: typescript@5.6.3 (comma-separated)",
      'packages.npm',
    ),
  );
  cmd.option(
    '--egress <targets>',
    help(
      'host:port targets the sandbox may reach through the gateway (comma-separated, repeatable; none: no egress)',
      'egress',
    ),
    collect,
  );
  cmd.option(
    '--egress-header <rule>',
    `'host:port=Header-Name: value' set by the gateway on every request to that target; {{secret:NAME}} in the value is filled from the host's secret store (repeatable; adds the target; 1-${EGRESS_RULE_LIMITS.headersMax} headers a target, values max ${EGRESS_RULE_LIMITS.valueMaxChars} chars)`,
    collect,
  );
  cmd.option(
    '--mount <mount>',
    help(
      `host-dir:name[:ro] read-only at ${MOUNTS_ROOT}/name; host-dir must be under the mount allowlist (repeatable)`,
      'mounts',
    ),
    collect,
  );
  for (const f of FIELD_FLAGS) {
    const option = new Option(f.flags, help(f.what, f.field));
    cmd.addOption(f.kind === 'string' ? option : option.argParser(parseNumber(f.kind)));
  }
  return cmd;
}

function attributeOf(flags: string): string {
  return new Option(flags).attributeName();
}

function setPath(spec: Record<string, unknown>, path: string, value: unknown): void {
  const [head, leaf] = path.split('.') as [string, string | undefined];
  if (leaf === undefined) spec[head] = value;
  else spec[head] = { ...((spec[head] as object | undefined) ?? {}), [leaf]: value };
}

/** The agent fields the flags give (none given = none set); the API checks the values. */
export function specFromFlags(o: Record<string, unknown>): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (o.provider !== undefined) spec.provider = o.provider;
  if (o.isolation !== undefined) spec.isolation = o.isolation;
  if (o.resident) spec.mode = 'resident';
  else if (o.mode !== undefined) spec.mode = o.mode;
  for (const f of FIELD_FLAGS) {
    const value = o[attributeOf(f.flags)];
    if (value !== undefined) setPath(spec, f.field, value);
  }
  if (o.keepAll) setPath(spec, 'retention.all', true);
  const apt = commaList(o.apt as string | undefined);
  const npm = commaList(o.npm as string | undefined);
  if (apt.length || npm.length)
    spec.packages = { ...(apt.length ? { apt } : {}), ...(npm.length ? { npm } : {}) };
  const egress = egressOf(
    (o.egress as string[] | undefined) ?? [],
    (o.egressHeader as string[] | undefined) ?? [],
  );
  if (egress) spec.egress = egress;
  const mounts = o.mount as string[] | undefined;
  if (mounts) spec.mounts = mounts.map(mountOf);
  return spec;
}

/** --egress targets and --egress-header rules as the schema's egress entries, in the order given. */
export function egressOf(targetFlags: string[], headerFlags: string[]): EgressEntry[] | undefined {
  if (targetFlags.length === 0 && headerFlags.length === 0) return undefined;
  const headers = new Map<string, Record<string, string>>();
  for (const target of targetFlags.flatMap((t) => commaList(t)))
    headers.set(target, headers.get(target) ?? {});
  for (const rule of headerFlags) {
    const m = /^([^=\s]+)=\s*([^:\s]+)\s*:\s?(.*)$/.exec(rule);
    if (!m)
      throw new BerthError(
        'INVALID_INPUT',
        `--egress-header ${JSON.stringify(rule)} is not host:port=Name: value`,
        {
          hint: "Write it as --egress-header 'api.example.com:443=Authorization: Bearer {{secret:example}}'.",
        },
      );
    const [, target, name, value] = m as unknown as [string, string, string, string];
    headers.set(target, { ...(headers.get(target) ?? {}), [name]: value });
  }
  return [...headers].map(([target, h]) => (Object.keys(h).length ? { target, headers: h } : target));
}

/** "host-dir:name[:ro]" (name may be written /data/name) as a mount; mounts are always read-only. */
export function mountOf(text: string): { hostPath: string; containerPath: string } {
  let rest = text;
  if (rest.endsWith(':ro')) rest = rest.slice(0, -3);
  else if (/:rw$/.test(rest))
    throw new BerthError('INVALID_INPUT', `--mount ${text}: agent mounts are read-only`, {
      hint: 'Drop ":rw"; a sandbox writes only its workspace (durable data goes to state or storage).',
    });
  const colon = rest.lastIndexOf(':');
  const hostPath = rest.slice(0, colon);
  let containerPath = rest.slice(colon + 1);
  if (containerPath.startsWith(`${MOUNTS_ROOT}/`))
    containerPath = containerPath.slice(MOUNTS_ROOT.length + 1);
  if (colon <= 0 || !containerPath)
    throw new BerthError('INVALID_INPUT', `--mount ${text} is not host-dir:name`, {
      hint: `Write it as --mount /srv/datasets:datasets (it appears read-only at ${MOUNTS_ROOT}/datasets).`,
    });
  return { hostPath, containerPath };
}
