/** The names berth gives sandboxes: deterministic, so a reconcile pass can read them back. */
/** One per binding, so a reconcile pass can tell which sandbox belongs to which binding. */
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
