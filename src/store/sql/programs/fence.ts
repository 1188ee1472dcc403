/** The fence every sandbox-driven transition passes first: the caller's generation and lease are current. */
import type { Fence, FenceCode } from '../../store.js';
import { get, type Program, type Row } from '../program.js';

/** ok, or why not: another generation or holder (stale), or no such session. Locks the session row where the engine can (FENCE). */
export function* checkFence(fence: Fence): Program<FenceCode> {
  if (yield* get('FENCE', fenceParams(fence))) return 'ok';
  return (yield* get('SESSION_BY_ID', { id: fence.sessionId })) ? 'stale' : 'not_found';
}

/** A fence as the parameters of FENCE, RECORD_SANDBOX and RELEASE_SESSION. */
export function fenceParams(f: Fence): Row {
  return { id: f.sessionId, generation: f.generation, worker: f.workerId };
}
