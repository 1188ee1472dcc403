/**
 * The operator's admin token file (<data>/admin-token, mode 0600), made by `berth up`: the
 * local CLI authenticates by being able to read it. Reading it needs nothing of the API,
 * so a CLI command starts without loading the server.
 */
import { readFile } from 'node:fs/promises';
import { hostPaths } from '../core/index.js';

/** The admin token in `dataDir`, or null when there is none (or it cannot be read). */
export async function readAdminToken(dataDir: string): Promise<string | null> {
  try {
    return (await readFile(hostPaths(dataDir).adminTokenFile, 'utf8')).trim() || null;
  } catch {
    return null;
  }
}
