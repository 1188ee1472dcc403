/**
 * What an apply changed, field by field: nested objects (recycle, budget, packages) by
 * their own fields, lists and plain values whole. Compares resolved specs (defaults
 * applied), so a file that leaves a default out and one that writes it are the same agent.
 */
import type { AgentSpec } from './agent.js';

/** One field that differs; `from` undefined = it was unset, `to` undefined = it is unset now. */
export interface AgentChange {
  path: string;
  from?: unknown;
  to?: unknown;
}

type Plain = Record<string, unknown>;

function isPlainObject(v: unknown): v is Plain {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function diffObjects(before: Plain, after: Plain, prefix: string, out: AgentChange[]): void {
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])];
  for (const key of keys) {
    const from = before[key];
    const to = after[key];
    const path = prefix ? `${prefix}.${key}` : key;
    if (isPlainObject(from) && isPlainObject(to)) diffObjects(from, to, path, out);
    else if (!same(from, to))
      out.push({ path, ...(from === undefined ? {} : { from }), ...(to === undefined ? {} : { to }) });
  }
}

/** The changes from `before` to `after`, in the order of `after`'s fields (then removed ones). */
export function diffAgentSpecs(before: AgentSpec, after: AgentSpec): AgentChange[] {
  const out: AgentChange[] = [];
  diffObjects(before as unknown as Plain, after as unknown as Plain, '', out);
  return out;
}
