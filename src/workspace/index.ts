/** workspace: committed + attempt layers, sealing, promotion, recovery. */

export type { CapturedCheckpoint } from './captures.js';
export type { CheckpointIndex } from './checkpoint-scan.js';
export { isProcessAlive } from './copy-eviction.js';
export { applyLayerArchive, packTree } from './layer-archive.js';
export { type WorkspaceLayout, workspaceLayout } from './layout.js';
export { isMountPoint, listMounts } from './overlay-mounts.js';
export { treeDiskBytes, WorkspaceQuota } from './quota.js';
export {
  CHECKPOINT_OBJECT_PREFIX,
  type EnsuredWorkspace,
  WORKSPACE_OBJECT_PREFIXES,
} from './workspace-cache.js';
export { DEFAULT_HISTORY_LIMITS, type HistoryLimits, WorkspaceHistory } from './workspace-history.js';
export { Workspaces } from './workspaces.js';
