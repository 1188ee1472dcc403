/** core: types, config, ids, clock, errors and pure deciders. No I/O. */
export * from './agent.js';
export * from './api-schemas.js';
export * from './clock.js';
export * from './config.js';
export * from './cron.js';
export * from './decide.js';
export * from './egress.js';
export * from './errors.js';
export * from './ids.js';
export * from './labels.js';
export * from './model-budget.js';
export * from './protocol.js';
export * from './schedule.js';
export * from './storage.js';
export * from './types.js';
export * from './wake-signal.js';
export * from './webhook.js';
