/**
 * What a dead worker on this machine left behind, found level-triggered from the store and
 * the disk: sandboxes of this install whose worker is gone, slots and run dirs no live sandbox uses,
 * attempt layers of turns that ended or died (a committed, unpromoted one is promoted).
 * What a live worker (the calling one included) is using is never touched.
 *
 * A live worker can look dead (cut off the store, or not renewed yet after an outage), so:
 * - the caller judges heartbeats only after it has reached the store for a whole lease;
 * - a slot whose container exists is in use, whatever its worker's heartbeat says;
 * - layers and session sandboxes' slots are judged by the store's fence, not by
 *   heartbeats (decideLeftoverLayer): a turn whose fence holds may yet commit.
 */
import { readdir, rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { decideLeftoverLayer, isLeaseFresh, LABELS } from '../core/index.js';
import type { Workspaces } from '../workspace/index.js';
import type { WorkerDeps } from './deps.js';
import { parsePoolSandboxName, parseSandboxName } from './paths.js';

export async function cleanUpLocalLeftovers(
  deps: Pick<WorkerDeps, 'store' | 'runtime' | 'clock' | 'config' | 'paths'>,
  workspaces: Workspaces,
  me: {
    workerId: string;
    installId: string;
    /** Sandbox names the caller's supervisors and warm pool hold now. */
    sandboxesInUse: () => Set<string>;
    isSupervised: (sessionId: string) => boolean;
    log: Logger;
  },
): Promise<void> {
  const { store, runtime, clock, config, paths } = deps;
  const now = clock.now();
  const live = new Set(
    (await store.listWorkers())
      .filter((w) => isLeaseFresh(w.heartbeatAt, now, config.leaseMs))
      .map((w) => w.id),
  );
  live.add(me.workerId);
  const orphans = (await runtime.list(me.installId)).filter((h) => !live.has(h.labels[LABELS.worker] ?? ''));
  await Promise.all(orphans.map((h) => runtime.kill(h)));
  // Each slot and layer is judged against the store read AFTER it was listed: a claim
  // (generation+1) commits before its slot or layer exists, so nothing in use looks stale.
  const mine = me.sandboxesInUse();
  let staleSlots = 0;
  // A sandbox's files are its slot and its run dir (socket, boot token); either may be left
  // alone by a crash between the two removals, so both are listed.
  const names = new Set([...(await workspaces.listSlots()), ...(await dirEntries(paths.runDir))]);
  // Listed after the slots: a slot whose container exists is in use (closing the slot of a
  // running warm sandbox would hide every later turn's files from it).
  const containers = new Set((await runtime.list(me.installId)).map((h) => h.name));
  for (const name of names) {
    if (mine.has(name) || containers.has(name)) continue;
    // A warm sandbox's slot (bound or not): in use while its (other, live) worker holds it.
    const warmOwner = parsePoolSandboxName(me.installId, name)?.workerId;
    if (warmOwner && warmOwner !== me.workerId && live.has(warmOwner)) continue;
    const binding = parseSandboxName(me.installId, name);
    const session = binding && (await store.getSessionView(binding.sessionId, clock.now()));
    if (session && session.generation === binding?.generation && session.leaseOwner !== null) continue;
    await workspaces.closeSlot(name);
    await rm(paths.sandboxRunDir(name), { recursive: true, force: true });
    staleSlots++;
  }
  let layers = 0;
  for (const { sessionId, turnId } of await workspaces.listLayers()) {
    if (me.isSupervised(sessionId)) continue;
    const turn = await store.getTurn(turnId);
    const session = await store.getSessionView(sessionId, clock.now()); // read after the turn (see the decider)
    const decision = decideLeftoverLayer(turnId, turn, session, (id) => live.has(id));
    if (decision === 'keep') continue;
    if (decision === 'promote') {
      const applied = await workspaces.promote(sessionId, turnId, null);
      await store.markLayerPromoted(sessionId, turnId);
      me.log.info({ sessionId, turnId, by: 'clean-up', planApplied: applied }, 'Layer promoted');
    }
    await workspaces.discard(sessionId, turnId);
    layers++;
  }
  if (orphans.length + staleSlots + layers > 0) {
    me.log.info({ sandboxes: orphans.length, slots: staleSlots, layers }, 'Cleaned up leftovers');
  }
}

/** A dir's entries; none when it does not exist yet (no sandbox was ever launched). */
async function dirEntries(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}
