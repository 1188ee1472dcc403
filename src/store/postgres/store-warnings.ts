/**
 * The warnings the PostgreSQL store gives (its `onWarning`, logged by the host) for trouble
 * it rides out. The texts are constant, variables go in the error beside them, so a log can
 * be searched for them: a chaos run finds in its processes' logs when berth first saw a
 * failed store call after a fault.
 */
export const STORE_WARNINGS = {
  retrying: 'PostgreSQL transaction failed; retrying',
  commitAnswerLost: 'The answer to a PostgreSQL COMMIT was lost; checking its commit marker',
  stuckConnectionDropped: 'PostgreSQL server stopped answering; dropping a connection stuck on it',
  serverGivenUp: 'Giving up a PostgreSQL server; looking for the primary again',
  listenerLost: 'PostgreSQL change listener lost its connection; reconnecting',
  hintsLost: 'PostgreSQL change hints of a committed write were lost with its connection',
  connectionLost: 'PostgreSQL connection lost',
  idleConnectionLost: 'Idle PostgreSQL connection lost',
  clockUnread: 'Could not read the database clock; keeping the last offset',
} as const;

/** The warnings that say a store call failed (and is being tried again). */
export const FAILED_CALL_WARNINGS: readonly string[] = [
  STORE_WARNINGS.retrying,
  STORE_WARNINGS.commitAnswerLost,
  STORE_WARNINGS.stuckConnectionDropped,
];
