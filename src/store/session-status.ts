/** Pure derivation of what a client sees of a session from stored facts; shared by both stores. */
import type { SessionStatus } from '../core/index.js';

export interface SessionFacts {
  leased: boolean;
  turnRunning: boolean;
  pending: number;
  runnable: number;
  lastInboundStatus: string | null;
}

export function deriveSessionStatus(f: SessionFacts): SessionStatus {
  if (f.turnRunning) return 'running';
  if (f.leased) return f.runnable > 0 ? 'starting' : 'bound';
  if (f.runnable > 0) return 'queued';
  if (f.pending > 0) return 'backoff';
  if (f.lastInboundStatus === 'failed') return 'failed';
  return 'idle';
}
