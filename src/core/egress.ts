/**
 * An agent's egress policy: the "host:port" targets its sandbox may reach, each with
 * optional header rules the gateway sets on every request to that target, e.g.
 * `{"target": "api.github.com:443", "headers": {"Authorization": "Bearer {{secret:github}}"}}`.
 * A rule's value is text with `{{secret:NAME}}` placeholders, filled on the host from the
 * secret store at request time: the sandbox never holds the value.
 */
import { z } from 'zod';
import { NAME_PATTERN } from './names.js';

/** "host:port": a DNS name or IPv4 address (lower case) and a port 1-65535. */
const EGRESS_TARGET =
  /^([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*):(\d{1,5})$/;

/** Parses "host:port" (host lower-cased); null when it is not one. */
export function egressTarget(text: string): { host: string; port: number } | null {
  const m = EGRESS_TARGET.exec(text.toLowerCase());
  if (!m) return null;
  const port = Number(m[2]);
  return port >= 1 && port <= 65535 ? { host: m[1]!, port } : null;
}

/** An RFC 9110 field name. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;
/** Framing and routing headers belong to the connection, not to a rule. */
const RESERVED_HEADER =
  /^(host|content-length|transfer-encoding|connection|keep-alive|te|trailer|upgrade|proxy-.*)$/i;
/** Visible ASCII, space and tab: nothing that could end the header line. */
const HEADER_TEXT = /^[\x20-\x7e\t]*$/;
const PLACEHOLDER = /\{\{secret:([^{}]*)\}\}/g;

/** The secret names a template uses, or a message saying what is wrong with it. */
export function templateSecrets(template: string): { names: string[] } | { error: string } {
  const names: string[] = [];
  for (const [, name = ''] of template.matchAll(PLACEHOLDER)) {
    if (!NAME_PATTERN.test(name)) return { error: `{{secret:${name}}} does not name a secret` };
    names.push(name);
  }
  const rest = template.replace(PLACEHOLDER, '');
  if (rest.includes('{{') || rest.includes('}}')) return { error: 'the only placeholder is {{secret:NAME}}' };
  if (!HEADER_TEXT.test(template)) return { error: 'only visible ASCII, spaces and tabs are allowed' };
  return { names };
}

/** Fills every `{{secret:NAME}}` with `secrets[NAME]` (all present: the caller checked). */
export function fillTemplate(template: string, secrets: Readonly<Record<string, string>>): string {
  return template.replace(PLACEHOLDER, (_, name: string) => secrets[name]!);
}

/** A filled value must still be one header line: a secret holding a line break is refused, never sent. */
export function isHeaderValue(value: string): boolean {
  return HEADER_TEXT.test(value);
}

/** How many headers one rule sets, and how long a rule's value may be (the CLI's help shows them). */
export const EGRESS_RULE_LIMITS = { headersMax: 16, valueMaxChars: 4096 } as const;

const targetText = z
  .string()
  .max(260)
  .transform((t) => t.toLowerCase())
  .refine((t) => egressTarget(t) !== null, 'each target is "host:port" (DNS name or IPv4, port 1-65535)');

const headerRules = z
  .record(
    z
      .string()
      .regex(HEADER_NAME, "header names are 1-64 token characters (A-Z a-z 0-9 and !#$%&'*+-.^_`|~)")
      .refine((n) => !RESERVED_HEADER.test(n), 'host, framing and proxy headers cannot be set by a rule'),
    z
      .string()
      .max(EGRESS_RULE_LIMITS.valueMaxChars)
      .superRefine((value, ctx) => {
        const parsed = templateSecrets(value);
        if ('error' in parsed) ctx.addIssue({ code: z.ZodIssueCode.custom, message: parsed.error });
      }),
  )
  .refine(
    (h) => Object.keys(h).length >= 1 && Object.keys(h).length <= EGRESS_RULE_LIMITS.headersMax,
    `a rule sets 1 to ${EGRESS_RULE_LIMITS.headersMax} headers`,
  )
  .refine(
    (h) => new Set(Object.keys(h).map((n) => n.toLowerCase())).size === Object.keys(h).length,
    'a header is named twice (names are case-insensitive)',
  );

export const egressEntrySchema = z.union([
  targetText,
  z.object({ target: targetText, headers: headerRules }).strict(),
]);
export type EgressEntry = z.output<typeof egressEntrySchema>;

export const egressSchema = z
  .array(egressEntrySchema)
  .max(256)
  .refine(
    (entries) => new Set(entries.map(targetOf)).size === entries.length,
    'a target is listed twice (give each host:port one entry)',
  );

/** One allowlisted target and the headers set on its requests (empty = the tunnel is spliced as is). */
export interface EgressRule {
  target: string;
  headers: Readonly<Record<string, string>>;
}

function targetOf(entry: EgressEntry): string {
  return typeof entry === 'string' ? entry : entry.target;
}

/** The agent's entries as rules, one per target. */
export function egressRules(entries: readonly EgressEntry[]): EgressRule[] {
  return entries.map((e) => (typeof e === 'string' ? { target: e, headers: {} } : e));
}
