/** mounts: an agent's extra read-only data mounts, checked against the host's mount allowlist. */
export {
  blockedPatternIn,
  DEFAULT_BLOCKED_PATTERNS,
  loadMountAllowlist,
  type MountAllowlist,
  type ResolvedMount,
  resolveMounts,
} from './mount-allowlist.js';
