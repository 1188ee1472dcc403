/** Pure derivation of what a client sees of a session from stored facts; shared by both stores. */
import type { SessionStatus } from '../core/index.js';

export interface SessionFacts {
  archived: boolean;
  leased: boolean;
  turnRunning: boolean;
  pending: number;
  /** The oldest pending message is due (a later one waits for it). */
  runnable: boolean;
  lastInboundStatus: string | null;
  /** Out of the claim queue until an operator acts (its resident workspace was lost). */
  held: boolean;
}

export function deriveSessionStatus(f: SessionFacts): SessionStatus {
  if (f.archived) return 'archived';
  if (f.turnRunning) return 'running';
  // Above everything a queue or a sandbox could show: nothing moves until an operator acts.
  if (f.held) return 'held';
  if (f.leased && f.runnable) return 'starting';
  if (f.runnable) return 'queued';
  if (f.pending > 0) return 'backoff';
  // A failed last message outranks an idle sandbox still bound to the session: it is what the user must see.
  if (f.lastInboundStatus === 'failed') return 'failed';
  return f.leased ? 'bound' : 'idle';
}
