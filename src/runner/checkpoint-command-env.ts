/** The session token a job finds in its environment (set by the runner, read by berth-checkpoint). Ships into the sandbox. */
export const GATEWAY_TOKEN_ENV = 'BERTH_GATEWAY_TOKEN';
