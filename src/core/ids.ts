/** Identifiers: what a caller may choose (session ids) and what berth generates. */
import { randomBytes } from 'node:crypto';
import { NAME_PATTERN } from './agent.js';
import { BerthError } from './errors.js';

/** Session ids appear in paths, container names and labels, so they are narrow. */
export function assertSessionId(id: string): string {
  if (!NAME_PATTERN.test(id) || id.includes('..')) {
    throw new BerthError(
      'INVALID_SESSION_ID',
      `Session id ${JSON.stringify(id.slice(0, 80))} is not allowed`,
    );
  }
  return id;
}

export function newId(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}
