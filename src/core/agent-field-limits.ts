/**
 * An agent field's default and limits, read from agentSpecSchema itself (and MODEL_DEFAULTS
 * for the defaults the runner applies), so the CLI's help and the schema cannot disagree.
 */
import { z } from 'zod';
import { agentSpecSchema, MODEL_DEFAULTS } from './agent.js';
import { AGENT_SCHEDULES_DEFAULT_CAP } from './schedule.js';

/** Defaults applied where the field is read (the runner, the gateway), not by the schema. */
const READ_DEFAULTS: Record<string, unknown> = {
  ...MODEL_DEFAULTS,
  maxSchedules: AGENT_SCHEDULES_DEFAULT_CAP,
};

/** Unwraps optional, default and refinements; returns the inner type and the schema default. */
function inner(schema: z.ZodTypeAny): { type: z.ZodTypeAny; fallback?: unknown } {
  let type = schema;
  let fallback: unknown;
  for (;;) {
    if (type instanceof z.ZodDefault) {
      fallback = type._def.defaultValue();
      type = type._def.innerType;
    } else if (type instanceof z.ZodOptional) type = type.unwrap();
    else if (type instanceof z.ZodEffects) type = type.innerType();
    else return { type, fallback };
  }
}

function fieldSchema(path: string): z.ZodTypeAny {
  let schema: z.ZodTypeAny = agentSpecSchema;
  for (const key of path.split('.')) {
    const object = inner(schema).type;
    if (!(object instanceof z.ZodObject)) throw new Error(`agent field ${path}: ${key} is not in an object`);
    const next = (object.shape as Record<string, z.ZodTypeAny>)[key];
    if (!next) throw new Error(`agent field ${path} is not in the agent schema`);
    schema = next;
  }
  return schema;
}

function numberRange(type: z.ZodNumber): string {
  let min = '';
  let max = '';
  for (const check of type._def.checks) {
    if (check.kind === 'min') min = check.inclusive ? `${check.value}` : `> ${check.value}`;
    if (check.kind === 'max') max = `${check.value}`;
  }
  if (min && max) return min.startsWith('>') ? `${min}, max ${max}` : `${min}-${max}`;
  if (min) return min.startsWith('>') ? min : `min ${min}`;
  return max ? `max ${max}` : '';
}

/** e.g. "default 512; 16-1048576", "default []; max 16 entries", "default runc" (an enum's choices are the caller's to show). */
export function agentFieldLimits(path: string): string {
  const { type, fallback } = inner(fieldSchema(path));
  const parts: string[] = [];
  const shown = fallback ?? READ_DEFAULTS[path];
  if (shown !== undefined) parts.push(`default ${typeof shown === 'string' ? shown : JSON.stringify(shown)}`);
  if (type instanceof z.ZodNumber) {
    const range = numberRange(type);
    if (range) parts.push(range);
  } else if (type instanceof z.ZodArray && type._def.maxLength)
    parts.push(`max ${type._def.maxLength.value} entries`);
  else if (type instanceof z.ZodString && type.maxLength !== null) parts.push(`max ${type.maxLength} chars`);
  return parts.join('; ');
}
