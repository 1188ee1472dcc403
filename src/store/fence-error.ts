/** The one place a fenced transition's code becomes an error. */
import { BerthError } from '../core/index.js';
import type { Fence, FenceCode } from './store.js';

export function fenceError(code: Exclude<FenceCode, 'ok'>, fence: Fence, operation: string): BerthError {
  if (code === 'stale') {
    return new BerthError(
      'STALE_GENERATION',
      `Session ${fence.sessionId} generation ${fence.generation} is not current for worker ${fence.workerId} (${operation})`,
    );
  }
  return new BerthError('TURN_NOT_FOUND', `Session ${fence.sessionId} has no such turn (${operation})`);
}
