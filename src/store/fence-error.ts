/** The one place a fenced transition's code becomes an error. */
import { BerthError } from '../core/index.js';
import type { CommitCode, Fence } from './store.js';

export function fenceError(code: Exclude<CommitCode, 'ok'>, fence: Fence, operation: string): BerthError {
  if (code === 'workspace_behind')
    return new BerthError(
      'WORKSPACE_BEHIND',
      `Session ${fence.sessionId}'s turn ran on a workspace that is not the store's current version (${operation})`,
    );
  if (code === 'interrupted')
    return new BerthError(
      'TURN_INTERRUPTED',
      `Session ${fence.sessionId}'s turn was asked to stop before it committed; nothing of it was written (${operation})`,
    );
  if (code === 'stale') {
    return new BerthError(
      'STALE_GENERATION',
      `Session ${fence.sessionId} generation ${fence.generation} is not current for worker ${fence.workerId} (${operation})`,
    );
  }
  return new BerthError('TURN_NOT_FOUND', `Session ${fence.sessionId} has no such turn (${operation})`);
}
