/** The audit log: refused generations, budgets, storage and egress decisions, failed schedule runs. */
import type { AuditEntry } from '../../store.js';
import { all, type Program, run } from '../program.js';

export function* audit(entry: AuditEntry, now: number): Program<void> {
  yield* run('INSERT_AUDIT', {
    now,
    kind: entry.kind,
    sessionId: entry.sessionId ?? null,
    generation: entry.generation ?? null,
    data: JSON.stringify(entry.data),
  });
}

export function* listAudit(
  afterId: number,
  limit: number,
): Program<(AuditEntry & { id: number; at: number })[]> {
  return (yield* all('AUDIT_AFTER', { afterId, limit })).map((r) => ({
    id: Number(r.id),
    at: Number(r.at),
    kind: String(r.kind),
    ...(r.session_id == null ? {} : { sessionId: String(r.session_id) }),
    ...(r.generation == null ? {} : { generation: Number(r.generation) }),
    data: JSON.parse(String(r.data)) as Record<string, unknown>,
  }));
}
