/** A message row as the store returns it, for unit tests: a pending inbound message of session s1, overridable field by field. */
import type { Message } from '../../src/core/index.js';

export function messageRow(fields: Partial<Message>): Message {
  return {
    id: 1,
    sessionId: 's1',
    direction: 'in',
    text: '',
    data: null,
    status: 'pending',
    tries: 0,
    processAfter: 0,
    turnId: null,
    inReplyTo: null,
    error: null,
    errorCode: null,
    createdAt: 0,
    ...fields,
  };
}
