/** Every Docker/Kubernetes label key berth writes, in one place. */
export const LABELS = {
  install: 'berth.install',
  session: 'berth.session',
  generation: 'berth.generation',
  worker: 'berth.worker',
  /** Warm sandboxes: the pool key (image + resources) they were started for. */
  pool: 'berth.pool',
  /** Agent images: the harnesses the image holds, comma-separated (image/agent-image.ts). */
  harnesses: 'berth.harnesses',
  /** Agent images: the Debian packages added to the base (the harnesses' and the agent's), comma-separated. */
  apt: 'berth.apt',
  /** Agent images: the agent's own npm packages (name@version), comma-separated. */
  npm: 'berth.npm',
} as const;
