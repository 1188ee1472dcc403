/**
 * Before a resident sandbox is mounted on a session's workspace (written in place, on one
 * data dir only): observe the store's record and this data dir's marker →
 * decideResidentWorkspace → act. This data dir either holds the workspace (use it), or
 * takes it when nobody does (marker first, then the store, fenced by the claim's
 * generation, so the store never names a holder whose marker could be missing), or
 * materialises it from the chain's capture of the current version when the files are on
 * another data dir (or lost here) and then takes it the same way, or the turn fails with RESIDENT_WORKSPACE_LOST and its session is held: it never runs on an
 * empty directory in place of files that live elsewhere.
 */
import type { Logger } from 'pino';
import { BerthError, decideResidentWorkspace, type Session } from '../core/index.js';
import type { Fence } from '../store/index.js';
import type { SandboxDeps } from './deps.js';

export async function claimResidentWorkspace(
  deps: SandboxDeps,
  session: Session,
  fence: Fence,
  log: Logger,
): Promise<void> {
  const { workspaces, store, clock, dataDir } = deps;
  const marker = await workspaces.readResidentMarker(session.id);
  const decision = decideResidentWorkspace({
    sessionId: session.id,
    record: session.resident,
    version: session.workspaceVersion,
    dataDir,
    marker,
  });
  switch (decision.action) {
    case 'use':
      return;
    case 'refuse':
      log.warn(
        { holder: session.resident.holderName, writtenAt: session.resident.writtenAt },
        'Resident workspace not here',
      );
      throw new BerthError('RESIDENT_WORKSPACE_LOST', decision.message);
    case 'materialise':
    case 'take': {
      if (decision.action === 'materialise') {
        const startedAt = performance.now();
        const chain = await store.getWorkspaceChain(session.id);
        const made = await workspaces.materialiseResident(chain);
        log.info(
          {
            reason: decision.reason,
            version: made.version,
            capturedAt: session.resident.capturedAt,
            objects: made.objects,
            bytes: made.bytes,
            ms: Math.round(performance.now() - startedAt),
          },
          'Resident workspace materialised from its capture',
        );
      } else {
        log.info(
          { emptyFirst: decision.emptyFirst, epoch: session.resident.epoch },
          'Resident workspace taken here',
        );
        if (decision.emptyFirst) await workspaces.emptyResident(session.id);
      }
      await workspaces.writeResidentMarker({
        sessionId: session.id,
        holder: dataDir.id,
        epoch: session.resident.epoch,
      });
      const recorded = await store.recordResidentHolder(
        { ...fence, holder: dataDir.id, holderName: dataDir.name },
        clock.now(),
      );
      // Claimed by another since: the abort this throws into is refused by the same fence, so it costs nothing.
      if (recorded !== 'ok')
        throw new BerthError(
          'STALE_GENERATION',
          `Session ${session.id} is no longer leased at generation ${fence.generation} (recordResidentHolder: ${recorded})`,
        );
    }
  }
}
