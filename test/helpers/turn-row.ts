/** A turn row as the store returns it, for unit tests: a first attempt of session s1, overridable field by field. */
import type { SandboxKill } from '../../src/chaos/index.js';
import type { Turn } from '../../src/core/index.js';

/** The docker kill of a default turnRow's sandbox while it runs, at 1500. */
export const SANDBOX_KILL: SandboxKill = {
  kind: 'sandbox-kill',
  at: 1500,
  killedAt: 1500,
  container: 'berth-x-s1-g1',
  warm: false,
  workerId: 'w1',
};

export function turnRow(fields: Partial<Turn>): Turn {
  return {
    id: 't',
    sessionId: 's1',
    attempt: 1,
    generation: 1,
    workerId: 'w1',
    sandbox: 'berth-x-s1-g1',
    status: 'committed',
    progress: null,
    error: null,
    errorCode: null,
    baseVersion: null,
    interruptRequestedAt: null,
    messageIds: [1],
    startedAt: 1000,
    endedAt: 2000,
    ...fields,
  };
}
