/**
 * Everything wrong with an agent spec at once, each issue with its path in the spec
 * (`egress[1]`, `recycle.maxAgeMs`) and its fix, for a file a person edits: the API stops
 * at the first issue, a file's author wants the whole list in one go. The rules are the
 * schema's (agentSpecSchema) and the cross-field rules (agentCrossFieldIssues), never a copy.
 */
import type { z } from 'zod';
import { type AgentIssue, type AgentSpec, agentCrossFieldIssues, agentSpecSchema } from './agent.js';
import { BerthError } from './errors.js';

export type AgentSpecCheck = { ok: true; spec: AgentSpec } | { ok: false; issues: AgentIssue[] };

/** Validates `value` as an agent spec (defaults applied) or lists every issue. */
export function checkAgentSpec(value: unknown): AgentSpecCheck {
  const parsed = agentSpecSchema.safeParse(value);
  if (!parsed.success) return { ok: false, issues: parsed.error.issues.flatMap((i) => issuesOf(i, value)) };
  const crossIssues = agentCrossFieldIssues(parsed.data);
  return crossIssues.length ? { ok: false, issues: crossIssues } : { ok: true, spec: parsed.data };
}

/** As checkAgentSpec, throwing INVALID_INPUT that lists every issue (`what` names the source, e.g. a file). */
export function parseAgentSpec(value: unknown, what = 'agent'): AgentSpec {
  const check = checkAgentSpec(value);
  if (check.ok) return check.spec;
  throw new BerthError('INVALID_INPUT', `Invalid ${what}: ${check.issues.map(issueLine).join('; ')}`, {
    hint: check.issues.map((i) => `${i.path || '(top)'}: ${i.fix}`).join('; '),
  });
}

/** "egress[1]: what is wrong (fix: what to do)". */
export function issueLine(issue: AgentIssue): string {
  return `${issue.path || '(top)'}: ${issue.message}`;
}

/** A zod path as a person writes it: `egress[1].headers.Authorization`. */
export function formatPath(path: readonly (string | number)[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

/** A value as the message quotes it, cut short: a whole list would bury the message. */
function shown(value: unknown): string {
  if (Array.isArray(value)) return `a list of ${value.length}`;
  const text = JSON.stringify(value) ?? 'nothing';
  return text.length > 80 ? `${text.slice(0, 77)}...` : text;
}

function valueAt(root: unknown, path: readonly (string | number)[]): unknown {
  let v = root;
  for (const part of path) v = v !== null && typeof v === 'object' ? (v as never)[part] : undefined;
  return v;
}

function issuesOf(issue: z.ZodIssue, root: unknown): AgentIssue[] {
  const path = formatPath(issue.path);
  switch (issue.code) {
    case 'unrecognized_keys':
      return issue.keys.map((key) => ({
        path: formatPath([...issue.path, key]),
        message: 'is not a field of an agent here',
        fix: 'remove it, or check its spelling against docs/config.md, Agents',
      }));
    case 'invalid_union':
      return unionIssues(issue, root);
    case 'invalid_type':
      return [
        issue.received === 'undefined'
          ? { path, message: 'is required', fix: `add it (${issue.expected})` }
          : { path, message: `is a ${issue.received}`, fix: `give a ${issue.expected}` },
      ];
    case 'invalid_enum_value':
      return [
        {
          path,
          message: `${JSON.stringify(issue.received)} is not allowed`,
          fix: `use one of: ${issue.options.join(', ')}`,
        },
      ];
    case 'too_small':
    case 'too_big':
      return [
        { path, message: `${shown(valueAt(root, issue.path))} is out of bounds`, fix: boundFix(issue) },
      ];
    default:
      // custom and string rules: zod's message states the rule, the value shows what broke it.
      return [
        {
          path,
          message: `${shown(valueAt(root, issue.path))} is not valid`,
          fix: issue.message,
        },
      ];
  }
}

function boundFix(issue: z.ZodTooSmallIssue | z.ZodTooBigIssue): string {
  const small = issue.code === 'too_small';
  const bound = Number(small ? issue.minimum : issue.maximum);
  const strict = !issue.inclusive;
  const what = issue.type === 'array' ? 'entries' : issue.type === 'string' ? 'characters' : '';
  const limit = `${small ? 'at least' : 'at most'} ${strict ? (small ? `more than ${bound}` : `less than ${bound}`) : bound}`;
  return `use ${strict ? limit.replace(/^at (least|most) /, '') : limit}${what ? ` ${what}` : ''}`;
}

/**
 * A union (an egress entry: "host:port" or {target, headers}) fails in every branch; the
 * branch that matches the value's shape says what is wrong with it.
 */
function unionIssues(issue: z.ZodInvalidUnionIssue, root: unknown): AgentIssue[] {
  const value = valueAt(root, issue.path);
  const shaped = issue.unionErrors.find(
    (e) => !e.issues.some((i) => i.code === 'invalid_type' && i.path.length === issue.path.length),
  );
  if (shaped) return shaped.issues.flatMap((i) => issuesOf(i, root));
  return [
    {
      path: formatPath(issue.path),
      message: `${shown(value)} is neither form`,
      fix: 'give a "host:port" string or {target: "host:port", headers: {NAME: VALUE}}',
    },
  ];
}
