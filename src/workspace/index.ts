/** workspace: committed + attempt layers, sealing, promotion, recovery. */

// Moved to durable-files; re-exported until blob-store imports it from there.
export { fsyncPath } from '../durable-files/index.js';
export { isMountPoint, listMounts } from './overlay-mounts.js';
export { treeDiskBytes, WorkspaceQuota } from './quota.js';
export { Workspaces } from './workspaces.js';
