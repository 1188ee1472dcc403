/**
 * Where a host keeps its files under the data dir; one function per kind of path. Paths
 * only (no I/O), so the CLI reaches them without loading the worker.
 */
import { createHash } from 'node:crypto';
import { join } from 'node:path';

export interface HostPaths {
  dataDir: string;
  storeFile: string;
  /** The operator's admin token (mode 0600), made at the first `berth up`: the local CLI reads it. */
  adminTokenFile: string;
  /** Holds the staged runner, one content-addressed dir per version of its code. */
  runnerDir: string;
  imageCacheDir: string;
  /** The secret store's file (mode 0600). */
  secretsFile: string;
  /** The per-install egress CA (key 0600, certificate), made on first start. */
  egressCaDir: string;
  /** Where mediated storage kept its blobs before the blob store; moved in at worker start (storage-blobs.ts). */
  storageDir: string;
  /** Holds one dir per sandbox (its gateway socket and boot token); absent until the first sandbox. */
  runDir: string;
  /** Reports of `berth chaos` runs, which the dashboard lists (GET /v1/chaos/reports). */
  chaosReportsDir: string;
  sandboxRunDir(sandboxName: string): string;
}

export function hostPaths(dataDir: string): HostPaths {
  return {
    dataDir,
    storeFile: join(dataDir, 'berth.db'),
    adminTokenFile: join(dataDir, 'admin-token'),
    runnerDir: join(dataDir, 'runner'),
    imageCacheDir: join(dataDir, 'cache'),
    secretsFile: join(dataDir, 'secrets.json'),
    egressCaDir: join(dataDir, 'egress-ca'),
    storageDir: join(dataDir, 'storage'),
    runDir: join(dataDir, 'run'),
    chaosReportsDir: join(dataDir, 'chaos'),
    sandboxRunDir: (name) => join(dataDir, 'run', name),
  };
}

/** An install is one data dir; its id scopes every label berth puts on sandboxes. */
export function installIdOf(dataDir: string): string {
  return createHash('sha256').update(dataDir).digest('hex').slice(0, 10);
}
