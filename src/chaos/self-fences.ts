/**
 * The workers' self-fences, as their logs have them: when each fenced itself and when the
 * store last took its renewal (the line's time minus its leaseAgeMs). What a store outage may
 * excuse of a turn lost with its worker's lease rests on them (fault-timing.ts).
 *
 * Invariants: pure, on logs already read (child-logs.ts); a line that is not JSON or not a
 * self-fence is skipped.
 */
import { parseJsonLines } from '../core/index.js';
import { SELF_FENCE_LOG } from '../worker/index.js';

export interface SelfFence {
  workerId: string;
  /** When it fenced itself (killed its sandboxes). */
  at: number;
  /** Its last renewal the store took, by the lease age it reckoned. */
  renewedAt: number;
}

/** The self-fences among a log's pino lines. */
export function selfFencesIn(log: string): SelfFence[] {
  const fences: SelfFence[] = [];
  for (const line of parseJsonLines(log, { skipInvalid: true }) as unknown[]) {
    if (typeof line !== 'object' || line === null) continue;
    const { msg, time, workerId, leaseAgeMs } = line as Record<string, unknown>;
    if (msg !== SELF_FENCE_LOG || typeof workerId !== 'string') continue;
    const at = Number(time);
    const age = Number(leaseAgeMs);
    if (Number.isFinite(at) && Number.isFinite(age)) fences.push({ workerId, at, renewedAt: at - age });
  }
  return fences;
}
