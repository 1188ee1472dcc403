/** Where a host keeps its files under the data dir; one function per kind of path. */
import { createHash } from 'node:crypto';
import { join } from 'node:path';

export interface HostPaths {
  dataDir: string;
  storeFile: string;
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
  sandboxRunDir(sandboxName: string): string;
}

export function hostPaths(dataDir: string): HostPaths {
  return {
    dataDir,
    storeFile: join(dataDir, 'berth.db'),
    runnerDir: join(dataDir, 'runner'),
    imageCacheDir: join(dataDir, 'cache'),
    secretsFile: join(dataDir, 'secrets.json'),
    egressCaDir: join(dataDir, 'egress-ca'),
    storageDir: join(dataDir, 'storage'),
    runDir: join(dataDir, 'run'),
    sandboxRunDir: (name) => join(dataDir, 'run', name),
  };
}

/** An install is one data dir; its id scopes every label berth puts on sandboxes. */
export function installIdOf(dataDir: string): string {
  return createHash('sha256').update(dataDir).digest('hex').slice(0, 10);
}

/** Deterministic, so a reconcile pass can tell which sandbox belongs to which binding. */
export function sandboxName(installId: string, sessionId: string, generation: number): string {
  return `berth-${installId}-${sessionId}-g${generation}`;
}

/** The binding a sandbox (or slot) name stands for; null for a name of another install or shape. */
export function parseSandboxName(
  installId: string,
  name: string,
): { sessionId: string; generation: number } | null {
  const prefix = `berth-${installId}-`;
  const m = /^(.+)-g(\d+)$/.exec(name.startsWith(prefix) ? name.slice(prefix.length) : '');
  return m ? { sessionId: m[1]!, generation: Number(m[2]) } : null;
}

/** A warm sandbox's name: never a session's (those end in -g<generation>), never reused. */
export function poolSandboxName(installId: string, workerId: string, seq: number): string {
  return `berth-${installId}-pool-${workerId}-${seq}`;
}

/** The worker that owns a warm sandbox (or its slot), from its name; null for any other name. */
export function parsePoolSandboxName(installId: string, name: string): { workerId: string } | null {
  const m = /^pool-(wrk_[a-z0-9]+)-\d+$/.exec(
    name.startsWith(`berth-${installId}-`) ? name.slice(`berth-${installId}-`.length) : '',
  );
  return m ? { workerId: m[1]! } : null;
}
