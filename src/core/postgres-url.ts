/**
 * PostgreSQL connection URLs in libpq's syntax, several hosts included:
 * `postgres://user:pw@h1:5432,h2:5432/berth?target_session_attrs=read-write`. node-postgres
 * parses only one host (a list is "Invalid URL") and ignores `target_session_attrs`, so
 * berth splits the list itself into one single-host URL per host, which pg does parse,
 * and keeps the session attribute for its own check of each server it connects to.
 *
 * Invariants: pure; a URL that parses has at least one host, every port is 1–65535, and
 * each single-host URL keeps the user, password, database and every other parameter of
 * the original. Reasons for a refusal name the offending part, never the password.
 */

/** What berth accepts of libpq's `target_session_attrs`: it writes, so a writable primary by default. */
export type TargetSessionAttrs = 'read-write' | 'any';

export interface PostgresHost {
  host: string;
  port: number;
}

export interface PostgresTarget {
  hosts: PostgresHost[];
  targetSessionAttrs: TargetSessionAttrs;
  /** One connection string per host, in the URL's order, without `target_session_attrs`. */
  hostUrls: string[];
}

export type ParsedPostgresUrl = { ok: true; target: PostgresTarget } | { ok: false; why: string };

const DEFAULT_PORT = 5432;
const URL_PARTS = /^(postgres(?:ql)?):\/\/(?:([^@/?#]*)@)?([^/?#]*)([^?#]*)(\?[^#]*)?$/;
const HOST_ENTRY = /^(\[[^\]]*\]|[^:[\]]*)(?::(.*))?$/;

export function parsePostgresUrl(url: string): ParsedPostgresUrl {
  const parts = URL_PARTS.exec(url);
  if (!parts) return { ok: false, why: 'not a postgres:// URL' };
  const [, scheme, userinfo, hostList = '', path = '', query = ''] = parts;
  if (hostList === '') return { ok: false, why: 'no host' };
  const params = new URLSearchParams(query.slice(1));
  const attrs = params.get('target_session_attrs') ?? 'read-write';
  if (attrs !== 'read-write' && attrs !== 'any')
    return {
      ok: false,
      why: `target_session_attrs=${attrs} is not supported (berth writes: use read-write, the default, or any)`,
    };
  params.delete('target_session_attrs');
  const others = params.toString();
  const rest = others === '' ? '' : `?${others}`;
  const hosts: PostgresHost[] = [];
  const hostUrls: string[] = [];
  const entries = hostList.split(',');
  for (const [i, entry] of entries.entries()) {
    const where = entries.length > 1 ? `host ${i + 1} of "${hostList}"` : `host "${hostList}"`;
    const m = HOST_ENTRY.exec(entry);
    if (!m || m[1] === '' || m[1] === '[]') return { ok: false, why: `${where} is empty or not a host` };
    const host = m[1]!;
    const rawPort = m[2];
    const port = rawPort === undefined ? DEFAULT_PORT : Number(rawPort);
    if (!/^\d{1,5}$/.test(rawPort ?? '5432') || !(port >= 1 && port <= 65535))
      return { ok: false, why: `${where}: port "${rawPort}" is not a number from 1 to 65535` };
    const single = `${scheme}://${userinfo === undefined ? '' : `${userinfo}@`}${host}:${port}${path}${rest}`;
    if (!URL.canParse(single)) return { ok: false, why: `${where} ("${entry}") is not a valid host` };
    hosts.push({ host: host.replace(/^\[|\]$/g, ''), port });
    hostUrls.push(single);
  }
  return { ok: true, target: { hosts, targetSessionAttrs: attrs, hostUrls } };
}
