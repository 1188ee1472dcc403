/** workspace: committed + attempt layers, sealing, promotion, recovery. */

export { isMountPoint, listMounts } from './mounts.js';
export { Workspaces } from './workspaces.js';
