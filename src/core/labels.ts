/** Every Docker/Kubernetes label key berth writes, in one place. */
export const LABELS = {
  install: 'berth.install',
  session: 'berth.session',
  generation: 'berth.generation',
  worker: 'berth.worker',
  /** Warm sandboxes: the pool key (image + resources) they were started for. */
  pool: 'berth.pool',
} as const;
