/** zod schemas of every gateway request body (the runner is untrusted input). */
import { z } from 'zod';
import { ASSERTION_MAX_CHARS, CHECKPOINT_LABEL_MAX_CHARS, RUNNER_ABORT_CODES } from '../core/index.js';

/** Turn ids are berth's own (newId('turn')): nothing else may reach a path. */
const turnId = z.string().regex(/^turn_[a-z0-9]{1,64}$/, 'not a turn id');

export const commitBody = z.object({
  turnId,
  outputs: z
    .array(
      z.object({
        text: z.string(),
        data: z.unknown().optional(),
        inReplyTo: z.array(z.number().int().positive()).min(1).max(1000).optional(),
      }),
    )
    .max(1000),
});
export const abortBody = z.object({
  turnId,
  error: z.string().max(64 * 1024),
  code: z.enum(RUNNER_ABORT_CODES).optional(),
});
export const progressBody = z.object({
  turnId,
  text: z.string().max(4096),
  failedStep: z
    .object({
      messageId: z.number().int().positive(),
      index: z.number().int().nonnegative().nullable(),
      kind: z.string().max(64).nullable(),
      assertion: z
        .object({ subject: z.string().max(1024), found: z.unknown(), expected: z.unknown() })
        .strict()
        .refine((a) => JSON.stringify(a).length <= 4 * ASSERTION_MAX_CHARS, 'assertion values too large')
        .optional(),
    })
    .strict()
    .optional(),
});
export const heartbeatBody = z.object({
  turnId: turnId.optional(),
  /** Resident sandboxes: what their processes hold, for the recycle policy. */
  usage: z
    .object({ rssBytes: z.number().int().nonnegative(), openFiles: z.number().int().nonnegative() })
    .strict()
    .optional(),
});
export const STATE_KEY = /^[A-Za-z0-9_.:-]{1,128}$/;
/** null deletes the key at commit. */
export const stateBody = z.object({ value: z.unknown().refine((v) => v !== undefined, 'value is required') });
/** A job's checkpoint: its label, printable text (no control characters: it travels in an environment variable). */
export const checkpointBody = z.object({
  label: z
    .string()
    .max(CHECKPOINT_LABEL_MAX_CHARS)
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
    .regex(/^[^\u0000-\u001f\u007f]*$/, 'a label holds no control characters')
    .default(''),
});

/** Exec ids are the gateway's own (newId('exec')). */
const execId = z.string().regex(/^exec_[a-z0-9]{1,64}$/, 'not an exec id');
export const execOutputBody = z.object({
  execId,
  stream: z.enum(['stdout', 'stderr']),
  data: z.string().max(1024 * 1024),
});
export const execExitBody = z.object({
  execId,
  exitCode: z.number().int().nullable(),
  signal: z.string().max(32).optional(),
  timedOut: z.boolean().optional(),
  error: z
    .object({ code: z.enum(['OUTPUT_LIMIT_EXCEEDED', 'EXEC_FAILED']), message: z.string().max(4096) })
    .optional(),
});
