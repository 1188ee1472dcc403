/** zod schemas of every gateway request body (the runner is untrusted input). */
import { z } from 'zod';

const turnId = z.string().min(1).max(128);

export const commitBody = z.object({
  turnId,
  outputs: z.array(z.object({ text: z.string(), data: z.unknown().optional() })).max(1000),
});
export const abortBody = z.object({ turnId, error: z.string().max(64 * 1024) });
export const progressBody = z.object({ turnId, text: z.string().max(4096) });
export const heartbeatBody = z.object({ turnId: turnId.optional() });
export const STATE_KEY = /^[A-Za-z0-9_.:-]{1,128}$/;
/** null deletes the key at commit. */
export const stateBody = z.object({ value: z.unknown().refine((v) => v !== undefined, 'value is required') });
