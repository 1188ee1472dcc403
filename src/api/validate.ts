/** zod at the HTTP boundary: the first issue becomes an INVALID_INPUT naming the field. */
import type { z } from 'zod';
import { BerthError } from '../core/index.js';

export function parseInput<T extends z.ZodTypeAny>(schema: T, value: unknown, what: string): z.output<T> {
  const parsed = schema.safeParse(value ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.path.join('.');
  throw new BerthError('INVALID_INPUT', `Invalid ${what}: ${field ? `${field}: ` : ''}${issue.message}`);
}
