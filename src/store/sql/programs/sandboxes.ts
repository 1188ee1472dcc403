/**
 * Sandbox records: each worker reports its sandboxes' lifecycles, the latest move winning,
 * in batches. With each batch, the sandboxes of workers that died are recorded gone
 * (WorkerLost), and records gone for a day go.
 */
import type { LiveSandbox, SandboxPhase, SandboxRecord } from '../../../core/index.js';
import { all, get, type Program, run } from '../program.js';
import { toSandboxRecord } from '../rows.js';

/** How long a gone sandbox's record is kept. */
const SANDBOX_HISTORY_MS = 24 * 3600 * 1000;

/** One batch of reports; the records of dead workers' sandboxes are ended, and old ones dropped, with it. */
export function* recordSandboxes(records: SandboxRecord[], now: number, leaseMs: number): Program<void> {
  for (const r of records) yield* run('UPSERT_SANDBOX', { ...r, pooled: r.pooled ? 1 : 0 });
  yield* run('END_SANDBOXES_OF_DEAD_WORKERS', { staleBefore: now - leaseMs, now });
  yield* run('DELETE_OLD_SANDBOXES', { endedBefore: now - SANDBOX_HISTORY_MS });
}

export function* listSandboxes(
  endedSince: number,
  limit: number,
  tenant: string | undefined,
): Program<SandboxRecord[]> {
  return (yield* all('LIST_SANDBOXES', { endedSince, limit, tenant: tenant ?? null })).map(toSandboxRecord);
}

export function* liveSandboxOf(sessionId: string): Program<LiveSandbox | null> {
  const r = yield* get('LIVE_SANDBOX_OF_SESSION', { sessionId });
  if (!r) return null;
  return {
    name: String(r.name),
    workerId: String(r.worker_id),
    generation: Number(r.generation),
    phase: r.phase == null ? null : (String(r.phase) as SandboxPhase),
    control:
      r.control_url == null || r.control_key == null
        ? null
        : { url: String(r.control_url), key: String(r.control_key) },
    workerHeartbeatAt: r.heartbeat_at == null ? 0 : Number(r.heartbeat_at),
  };
}
