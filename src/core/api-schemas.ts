/**
 * The HTTP API's request shapes, as zod schemas. One definition serves three readers:
 * the API validates with them, /v1/openapi.json is generated from them, and the SDK
 * (src/client) takes its parameter types from them. Responses are the core record types.
 */
import { z } from 'zod';
import { agentSpecSchema, NAME_PATTERN } from './agent.js';
import type { AgentChange } from './agent-diff.js';
import {
  CHANNEL_MAPPINGS,
  CHANNEL_PLATFORMS,
  CHANNEL_RESPOND,
  type EmailSettings,
  MAIL_SECURITY,
} from './channel.js';
import type { Agent, SessionStatus } from './types.js';

export { agentSpecSchema };

/** PUT /v1/agents/:name answers the agent, whether it was new, and what changed (nothing for a new one). */
export interface AppliedAgent {
  agent: Agent;
  created: boolean;
  changes: AgentChange[];
}

/** PATCH /v1/agents/:name: any spec field but the name; what is left out stays. */
export const agentPatchSchema = agentSpecSchema.omit({ name: true }).partial().strict();

const sessionIdSchema = z
  .string()
  .regex(NAME_PATTERN, 'id: 1-64 of A-Z a-z 0-9 _ - . starting with a letter or digit');

/** POST /v1/sessions: a session with no message yet; the id is generated when left out. */
export const createSessionSchema = z
  .object({ id: sessionIdSchema.optional(), agent: z.string().min(1, 'agent must not be empty') })
  .strict();

/** A workspace version of a session: 0 (before its first commit) or more. */
const workspaceVersionSchema = z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** POST /v1/sessions/:id/fork: the new session's id, generated when left out; the version it starts from, the source's current one when left out. */
export const forkSessionSchema = z
  .object({ id: sessionIdSchema.optional(), fromVersion: workspaceVersionSchema.optional() })
  .strict();

/** POST /v1/sessions/:id/rewind: the retained version whose workspace the session goes back to. */
export const rewindSessionSchema = z.object({ toVersion: workspaceVersionSchema }).strict();

/** POST /v1/sessions/:id/messages. `agent` is needed only when the post creates the session. */
export const postMessageSchema = z
  .object({ text: z.string().min(1, 'text must not be empty'), agent: z.string().min(1).optional() })
  .strict();

export const SESSION_STATUSES = [
  'idle',
  'queued',
  'backoff',
  'starting',
  'running',
  'bound',
  'failed',
  'held',
  'archived',
] as const satisfies readonly SessionStatus[];

/**
 * POST /v1/sessions/:id/interrupt. `discard=true` is the only form today: the turn's work
 * is discarded (keeping it up to its last checkpoint comes with checkpoints). `turn` names
 * the turn meant: another turn running by then is not interrupted (NO_RUNNING_TURN).
 */
export const interruptQuerySchema = z
  .object({
    discard: z
      .literal('true', {
        errorMap: () => ({
          message:
            "discard: only 'true' today (the turn's workspace changes are discarded); keeping them up to the last checkpoint comes with checkpoints",
        }),
      })
      .default('true'),
    turn: z.string().min(1).optional(),
  })
  .strict();

/** DELETE /v1/sessions/:id/messages/:mid: an inbound message's id. */
export const messageIdSchema = z.coerce
  .number({ invalid_type_error: 'message id: a positive integer' })
  .int('message id: a positive integer')
  .positive('message id: a positive integer');

/** GET /v1/sessions filters. Archived sessions are listed only when asked for. */
/**
 * GET /v1/sessions: one page in creation order. `after` is the previous page's `next` (an
 * opaque cursor); the filters apply within the page, so a filtered page may hold fewer
 * than `limit` sessions while `next` is not null.
 */
/**
 * A keyset-paginated listing (GET /v1/agents, /v1/tokens, ...): `after` is the previous
 * page's `next` (an opaque cursor, none for the first page), `limit` how many at most.
 */
export const cursorPageShape = {
  after: z.string().min(1).max(600).optional(),
  limit: z.coerce.number().int().min(1).max(500).default(100),
};
export const cursorPageQuerySchema = z.object(cursorPageShape).strict();

export const listSessionsQuerySchema = z
  .object({
    status: z.enum(SESSION_STATUSES).optional(),
    agent: z.string().min(1).optional(),
    archived: z.enum(['true', 'false']).default('false'),
    ...cursorPageShape,
  })
  .strict();

/** Cursor pagination: `after` is the last id of the previous page (the response's `next`). */
export const pageQuerySchema = z
  .object({
    after: z.coerce.number().int().min(0).default(0),
    limit: z.coerce.number().int().min(1).max(500).default(100),
  })
  .strict();

/**
 * GET /v1/sessions/:id/files: the workspace as of `version` (default: the current one);
 * `path` is a dir to list or a file to read, relative to the workspace ('' = its root).
 */
export const filesQuerySchema = z
  .object({
    version: z.coerce.number().int().min(0).optional(),
    path: z
      .string()
      .max(4096)
      .transform((p) => p.replace(/^\/+|\/+$/g, ''))
      .refine((p) => !p.split('/').some((s) => s === '..'), 'must not contain ".." segments')
      .default(''),
  })
  .strict();

/** SSE: resume after an event id (the Last-Event-ID header wins over ?after=). */
export const eventsQuerySchema = z.object({ after: z.coerce.number().int().min(0).optional() }).strict();

/** The largest tenant weight in the fair share of claims: keeps every tenant's stride a whole number. */
export const FAIR_SHARE_MAX_WEIGHT = 1000;

/** POST /v1/tokens (admin). */
export const createTokenSchema = z
  .object({
    tenant: z
      .string()
      .regex(NAME_PATTERN, 'tenant: 1-64 of A-Z a-z 0-9 _ - . starting with a letter or digit'),
    label: z.string().max(200).default(''),
    /** The tenant's weight in the fair share of claims (it gets `weight` turns to a weight-1 tenant's one); absent = unchanged. */
    weight: z
      .number()
      .int('weight: a whole number')
      .min(1, 'weight: at least 1')
      .max(FAIR_SHARE_MAX_WEIGHT, `weight: at most ${FAIR_SHARE_MAX_WEIGHT}`)
      .optional(),
  })
  .strict();

export const WEBHOOK_EVENT_TYPES = [
  'queued',
  'started',
  'progress',
  'checkpoint',
  'reply',
  'retrying',
  'failed',
  'held',
  'archived',
  'cancelled',
  'interrupting',
  'interrupted',
  'rewound',
] as const;

/** POST /v1/webhooks: events of one agent's sessions, or of one session, to a URL. */
export const createWebhookSchema = z
  .object({
    url: z
      .string()
      .url('url: an absolute http(s) URL')
      .refine((u) => /^https?:\/\//.test(u), 'url: must be http or https'),
    agent: z.string().min(1).optional(),
    session: sessionIdSchema.optional(),
    /** @default ['reply', 'failed'] */
    events: z.array(z.enum(WEBHOOK_EVENT_TYPES)).min(1).default(['reply', 'failed']),
  })
  .strict()
  .refine((w) => (w.agent === undefined) !== (w.session === undefined), {
    message: 'name exactly one of agent and session',
    path: ['agent'],
  });

export const errorBodySchema = z.object({
  error: z.object({ code: z.string(), message: z.string(), hint: z.string() }),
});

export type AgentPatch = z.input<typeof agentPatchSchema>;
export type CreateSessionBody = z.input<typeof createSessionSchema>;
export type PostMessageBody = z.input<typeof postMessageSchema>;
export type ListSessionsQuery = z.input<typeof listSessionsQuerySchema>;
export type PageQuery = z.input<typeof pageQuerySchema>;
export type CursorPageQuery = z.input<typeof cursorPageQuerySchema>;
export type FilesQuery = z.input<typeof filesQuerySchema>;
export type CreateTokenBody = z.input<typeof createTokenSchema>;
export type CreateWebhookBody = z.input<typeof createWebhookSchema>;

/**
 * One allowlist entry: `@username` (Telegram's 5-32 of A-Z a-z 0-9 _), a numeric id
 * (Telegram), a member id (Slack's U…/W…), or for email a sender's address or `@domain`.
 */
const channelUserSchema = z
  .string()
  .regex(
    /^(@[A-Za-z0-9_]{1,64}|-?[0-9]{1,20}|[UW][A-Z0-9]{2,20}|[^\s@<>,]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+)$/,
    'allow: each entry is @username, a numeric user id (Telegram), a member id like U012AB3CD (Slack), or a sender address like alice@example.com or @example.com (email)',
  );
const secretNameSchema = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, 'a secret name');
const hostSchema = z.string().regex(/^[A-Za-z0-9.:[\]-]{1,253}$/, 'a host name or IP address');
const portSchema = z.number().int().min(1).max(65_535);

/** An email channel's servers; the password is the channel's token secret. */
export const emailSettingsSchema = z
  .object({
    /** The bot's address: the From of its replies. */
    address: z
      .string()
      .regex(/^[^\s@<>,]{1,64}@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/, 'address: like bot@example.com'),
    /** The login of both servers. @default the address */
    user: z.string().min(1).max(256).optional(),
    imapHost: hostSchema,
    /** @default 993 with tls, else 143 */
    imapPort: portSchema.optional(),
    /** @default 'tls' */
    imapSecurity: z.enum(MAIL_SECURITY).default('tls'),
    /** The mailbox read. @default 'INBOX' */
    mailbox: z.string().min(1).max(256).default('INBOX'),
    smtpHost: hostSchema,
    /** @default 465 with tls, 587 with starttls, else 25 */
    smtpPort: portSchema.optional(),
    /** @default 'tls' */
    smtpSecurity: z.enum(MAIL_SECURITY).default('tls'),
  })
  .strict()
  .transform(
    (e): EmailSettings => ({
      ...e,
      address: e.address.toLowerCase(),
      user: e.user ?? e.address,
      imapPort: e.imapPort ?? (e.imapSecurity === 'tls' ? 993 : 143),
      smtpPort: e.smtpPort ?? (e.smtpSecurity === 'tls' ? 465 : e.smtpSecurity === 'starttls' ? 587 : 25),
    }),
  );

export const createChannelSchema = z
  .object({
    platform: z.enum(CHANNEL_PLATFORMS),
    /** The channel's id (it names its sessions: tg-<id>-<chat>); generated when omitted. */
    name: z
      .string()
      .regex(/^[a-z0-9][a-z0-9_]{0,23}$/, 'name: 1-24 of a-z 0-9 _ starting with a letter or digit')
      .optional(),
    agent: z.string().min(1),
    /** The name of the bot token in the host's secret store (berth secret set <name>). */
    tokenSecret: secretNameSchema,
    /**
     * Slack (Events API over HTTP): the name of its signing secret in the host's secret store.
     * Telegram (webhook mode, with webhookUrl): the name of the webhook's `secret_token`.
     */
    signingSecret: secretNameSchema.optional(),
    /** Slack Socket Mode: the name of the app-level token (`xapp-…`) in the host's secret store, instead of signingSecret. */
    appTokenSecret: secretNameSchema.optional(),
    /** Telegram webhook mode: berth's public base URL (https), where Telegram POSTs updates; omitted = long polling. */
    webhookUrl: z
      .string()
      .url()
      .regex(/^https?:\/\//, 'webhookUrl: an http(s) URL')
      .max(512)
      .optional(),
    /** @default 'per-chat' */
    mapping: z.enum(CHANNEL_MAPPINGS).default('per-chat'),
    /** Which group messages reach the agent: all, or only those naming the bot (direct messages always do). @default 'all' */
    respondTo: z.enum(CHANNEL_RESPOND).default('all'),
    /** Email: the IMAP and SMTP servers and the bot's address (required for email). */
    email: emailSettingsSchema.optional(),
    /** @default [] */
    allowUsers: z.array(channelUserSchema).max(1000).default([]),
    /** @default [] */
    allowChats: z
      .array(
        z
          .string()
          .regex(
            /^(-?[0-9]{1,20}|[CDG][A-Z0-9]{2,20})$/,
            'allowChats: numeric chat ids (Telegram), conversation ids like C012AB3CD (Slack) or numeric channel ids (Discord)',
          ),
      )
      .max(1000)
      .default([]),
  })
  .strict();

export type CreateChannelBody = z.input<typeof createChannelSchema>;
export type ErrorBody = z.output<typeof errorBodySchema>;
