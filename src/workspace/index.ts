/** workspace: committed + attempt layers, sealing, promotion, recovery. */

export { isMountPoint, listMounts } from './overlay-mounts.js';
export { treeDiskBytes, WorkspaceQuota } from './quota.js';
export { Workspaces } from './workspaces.js';
