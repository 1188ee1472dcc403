/** What each kind of row is re-read as when a guarded statement on it did not change it (see guarded in program.ts). */
import type { Guard } from '../program.js';

export function sessionGuard(sessionId: string, expected: string): Guard {
  return {
    entity: `Session ${sessionId}`,
    expected,
    reread: 'SESSION_BY_ID',
    key: { id: sessionId },
    columns: ['generation', 'lease_owner', 'sandbox', 'archived_at'],
  };
}

export function messageGuard(messageId: number, expected: string): Guard {
  return {
    entity: `Message ${messageId}`,
    expected,
    reread: 'MESSAGE_BY_ID',
    key: { id: messageId },
    columns: ['status', 'turn_id', 'tries'],
  };
}

export function turnGuard(turnId: string): Guard {
  return {
    entity: `Turn ${turnId}`,
    expected: 'running',
    reread: 'TURN_BY_ID',
    key: { id: turnId },
    columns: ['status', 'session_id', 'generation'],
  };
}
