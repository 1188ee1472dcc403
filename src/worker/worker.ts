/**
 * A worker owns N slots on one machine. It pulls: a session is claimed only when a slot
 * is free, so a peak queues (with a visible position) instead of failing. A claimed
 * session is bound to a warm sandbox from the worker's pool when one is ready. It renews its
 * own row every lease/5 (its sessions' leases live only while that row is fresh), sweeps
 * sessions of dead workers back into the queue, routes engine exit events to the
 * supervisor of the sandbox, and at start reaps this install's sandboxes whose worker is
 * gone. If its row's heartbeat grows 0.6 of a lease old it kills its own sandboxes before
 * anyone else may take their sessions over (self-fencing). Renewal, sweep and self-fence
 * each run on a timer of their own, so none waits for the others.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { type ELDHistogram, monitorEventLoopDelay } from 'node:perf_hooks';
import type { Logger } from 'pino';
import { collectGarbage, StorageBlobs } from '../blobs/index.js';
import {
  agentSpecSchema,
  BerthError,
  decideOwnLease,
  installIdOf,
  newId,
  sleep,
  WakeSignal,
} from '../core/index.js';
import { stageRunner } from '../runtime/index.js';
import type { StoreChange } from '../store/index.js';
import { CHECKPOINT_OBJECT_PREFIX, WORKSPACE_OBJECT_PREFIXES, Workspaces } from '../workspace/index.js';
import { collectChannelFiles } from './channel-files-gc.js';
import { ControlServer } from './control-server.js';
import { type DataDirIdentity, dataDirIdentity } from './data-dir-identity.js';
import { joinDataDir, leaveDataDir } from './data-dir-users.js';
import type { SandboxDeps, WorkerDeps } from './deps.js';
import { cleanUpLocalLeftovers } from './local-cleanup.js';
import { poolSandboxName } from './paths.js';
import { launchSandbox, newSandboxLifecycle, profileOf, removeSandboxFiles } from './sandbox-launch.js';
import { sandboxModeOf } from './sandbox-modes.js';
import { SandboxReports } from './sandbox-reports.js';
import { SessionSupervisor, type SupervisorDeps } from './session-supervisor.js';
import { WarmPool, type WarmPoolStats } from './warm-pool.js';
import { resolveCacheBudget, WorkspaceBudget, type WorkspaceCacheStats } from './workspace-budget.js';

const EVENTS_CONNECT_TIMEOUT_MS = 10_000;
/** The sandbox's non-root user owns what a turn writes. */
const SANDBOX_UID = 1000;
/** Local leftovers (containers, slots, layers) are cleaned up once every this many sweeps. */
const CLEANUP_EVERY_SWEEPS = 5;
/** Blob-store objects nothing names are collected at start and then this often. */
const BLOB_GC_INTERVAL_MS = 60 * 60_000;

/** The log line of a self-fence (with leaseAgeMs: since the last renewal the store took); the chaos verdict reads it. */
export const SELF_FENCE_LOG = 'Lease about to lapse: killing own sandboxes';

export class Worker {
  readonly id = newId('wrk');
  readonly installId: string;
  private readonly secret = randomBytes(32);
  /** What the API presents at the control endpoint: new with every worker process, so a restart invalidates the old one. */
  private readonly controlKey = randomBytes(32).toString('hex');
  private readonly control: ControlServer;
  private controlUrl = '';
  private readonly supervisors = new Map<string, SessionSupervisor>();
  private readonly running = new Set<Promise<void>>();
  private readonly claimWake = new WakeSignal();
  private readonly abort = new AbortController();
  private readonly log: Logger;
  /**
   * The heartbeat the store holds for this worker: the time (the store's clock) its last
   * successful renewal wrote, by which every other worker judges its lease.
   */
  private heartbeatAt = 0;
  /** Set by drain(): nothing is claimed from then on, and a running turn is handed back at this time (epoch ms). */
  private drainUntil: number | null = null;
  private drainAsked: () => void = () => undefined;
  /** Resolves once the store says this worker was asked to drain (berth worker drain): its process should then drain and stop, as on SIGTERM. */
  readonly drainRequested = new Promise<void>((resolve) => {
    this.drainAsked = resolve;
  });
  /** When the renewal in flight was sent (performance.now()); null between renewals. */
  private renewalSentAt: number | null = null;
  /** This process's event-loop delays since the last renewal: a self-fence says whether it was starved. */
  private readonly loopDelay: ELDHistogram = monitorEventLoopDelay({ resolution: 20 });
  /** Since when every renewal has reached the store: cleanUpLocal judges heartbeats only a lease after that. */
  private storeReachableSince = 0;
  /** Time of the last runtime event seen (0 = never connected); a reconnect replays from just before it. */
  private lastEventAt = 0;
  /** Idle sandboxes already giving their slot up, so one queued session frees one slot, not all. */
  private readonly yielding = new Set<string>();
  private readonly workspaces: Workspaces;
  private readonly storageBlobs: StorageBlobs;
  /** The staged runner this worker's sandboxes mount (content-addressed, never rewritten). */
  private runnerDir = '';
  private loops: Promise<unknown>[] = [];
  /** The clean-up of local leftovers under way (one at a time). */
  private cleaning: Promise<void> | null = null;
  /** The sweep of expired leases under way (one at a time). */
  private unsubscribe: (() => void) | null = null;
  private pool: WarmPool | null = null;
  private readonly sandboxReports: SandboxReports;
  /** Read at start, before any sandbox or session is served. */
  private dataDir: DataDirIdentity | null = null;
  /** Made at start (its default budget reads the data dir's file system). */
  private cacheBudget: WorkspaceBudget | null = null;

  constructor(private readonly deps: WorkerDeps) {
    this.installId = installIdOf(deps.paths.dataDir);
    this.workspaces = new Workspaces(deps.paths.dataDir, SANDBOX_UID, deps.blobs);
    this.storageBlobs = new StorageBlobs(deps.blobs);
    this.log = deps.log.child({ workerId: this.id });
    this.sandboxReports = new SandboxReports(deps.store, deps.clock, this.log);
    this.control = new ControlServer({
      listen: deps.config.controlListen,
      key: this.controlKey,
      workerId: this.id,
      store: deps.store,
      clock: deps.clock,
      log: this.log.child({ component: 'control' }),
      maxOutputBytes: deps.config.maxOutputBytes,
      held: (sessionId) => this.supervisors.get(sessionId)?.heldSandbox() ?? null,
    });
  }

  get activeSessions(): number {
    return this.supervisors.size;
  }

  get warmPoolStats(): WarmPoolStats {
    return this.pool?.stats() ?? { ready: 0, starting: 0, hits: 0, misses: 0 };
  }

  /** The workspace copies' cache: its budget, bytes, hits, misses and evictions (zeros before start). */
  get workspaceCacheStats(): WorkspaceCacheStats {
    return this.cacheBudget?.stats() ?? { budgetBytes: 0, bytes: 0, hits: 0, misses: 0, evictions: 0 };
  }

  async start(): Promise<void> {
    const { store, clock, config, paths } = this.deps;
    await this.workspaces.prepare();
    this.cacheBudget = new WorkspaceBudget(
      this.workspaces,
      store,
      await resolveCacheBudget(config.cacheBytes, paths.dataDir),
      this.log.child({ component: 'workspace-cache' }),
    );
    await joinDataDir(paths.dataDir, this.id);
    this.dataDir = await dataDirIdentity(paths.dataDir);
    const adopted = await this.storageBlobs.adoptLegacy(paths.storageDir);
    if (adopted > 0)
      this.log.info({ adopted }, 'Moved storage blobs of an older data dir into the blob store');
    this.runnerDir = await stageRunner(paths.runnerDir);
    this.controlUrl = await this.control.listen();
    const now = clock.now();
    await this.register(now);
    this.heartbeatAt = now;
    this.loopDelay.enable();
    // Renewed from the registration on: the start-up clean-up may take a while (Docker kills).
    this.loops = [this.renewLoop(), this.selfFenceLoop()];
    try {
      await this.cleanUpLocal();
    } catch (err) {
      this.abort.abort();
      await this.control.close();
      await Promise.allSettled(this.loops);
      this.loopDelay.disable();
      throw err;
    }
    this.unsubscribe = store.onChange((change) => this.onStoreChange(change));
    const connected = new WakeSignal();
    this.loops.push(this.watchRuntime(connected), this.sweepLoop(), this.blobGcLoop());
    // No sandbox starts before its exit can be seen.
    await connected.wait(EVENTS_CONNECT_TIMEOUT_MS);
    if (this.lastEventAt === 0) {
      await this.stop();
      throw new BerthError(
        'DOCKER_UNREACHABLE',
        `Runtime event stream did not connect in ${EVENTS_CONNECT_TIMEOUT_MS} ms`,
      );
    }
    this.sandboxReports.start();
    this.cacheBudget.start();
    this.pool = this.createPool();
    this.pool.start();
    this.loops.push(this.claimLoop());
    this.log.info({ slots: config.slots, installId: this.installId }, 'Worker started');
  }

  /**
   * Claims nothing more and lets every supervision end by itself: an idle session is handed
   * back at once, a running turn may end by itself for `graceMs`, then is handed back as at a
   * stop. Resolves once every supervision ended (stop() then ends the rest: pool, loops, row).
   */
  async drain(graceMs: number): Promise<void> {
    const { clock, store } = this.deps;
    const since = clock.now();
    this.drainUntil ??= since + graceMs;
    this.claimWake.notify();
    this.log.info({ graceMs, sessions: this.supervisors.size }, 'Worker draining');
    // A supervisor that a claim already under way adds later is told in supervise().
    for (const s of this.supervisors.values()) s.drain(this.drainUntil);
    // For status only, so after the supervisors were told: a drain the store cannot record
    // (it is away) goes on all the same.
    await store.drainWorker(this.id, since).catch((err: unknown) => {
      this.log.warn({ err }, 'Could not record the drain in the store');
    });
    while (this.running.size > 0) await Promise.allSettled(this.running);
    this.log.info({ drainedMs: clock.now() - since }, 'Worker drained');
  }

  /** Stops claiming, ends every supervision (running turns are aborted and retried elsewhere), removes the worker row. */
  async stop(): Promise<void> {
    this.abort.abort();
    this.unsubscribe?.();
    this.claimWake.notify();
    for (const s of this.supervisors.values()) s.stop('WorkerStopping');
    await Promise.allSettled([...this.running, ...this.loops, this.cleaning, this.pool?.stop()]);
    await this.cacheBudget?.stop();
    await this.sandboxReports.stop();
    await this.control.close();
    this.loopDelay.disable();
    await this.deps.store.removeWorker(this.id);
    // Workers on other machines share the store, not this data dir: only this dir's own users count.
    if (await leaveDataDir(this.deps.paths.dataDir, this.id)) await this.workspaces.release();
    this.log.info('Worker stopped');
  }

  private onStoreChange(change: StoreChange): void {
    if (change.type === 'enqueued') {
      const owner = this.supervisors.get(change.sessionId);
      if (owner && change.leaseOwner === this.id) {
        owner.poke();
        return;
      }
      this.claimWake.notify();
      // All slots busy: idle sandboxes re-check whether to give theirs up.
      if (this.supervisors.size >= this.deps.config.slots)
        for (const s of this.supervisors.values()) s.poke();
    } else if (change.type === 'released') {
      this.claimWake.notify();
    } else if (change.type === 'interrupt' && change.leaseOwner === this.id) {
      this.supervisors.get(change.sessionId)?.interruptHinted();
    }
  }

  private async claimLoop(): Promise<void> {
    const { store, clock, config } = this.deps;
    while (!this.abort.signal.aborted) {
      let claimed = false;
      const mayClaim =
        this.drainUntil === null &&
        this.supervisors.size < config.slots &&
        decideOwnLease(this.heartbeatAt, clock.now(), config.leaseMs) === 'ok';
      if (mayClaim) {
        try {
          const c = await store.claimRunnableSession(this.id, clock.now());
          if (c) {
            claimed = true;
            const poolable = sandboxModeOf(c.agent, config).poolable;
            const warm = poolable ? this.pool!.take(profileOf(c.agent, this.deps.image)) : null;
            this.supervise(new SessionSupervisor(this.supervisorDeps(), c.session, c.agent, warm));
          }
        } catch (err) {
          this.log.error({ err }, 'Claim failed');
        }
      }
      if (claimed) continue;
      // Woken by a new message, a released session, a freed slot, or the next backoff expiry;
      // the renew tick is the floor, for writers in other processes. With every slot busy only
      // a freed slot can change anything: no store read then, though every message posted
      // anywhere wakes every worker. Nor while the lease bars claims: a session runnable now
      // would make the wait 0 and the loop spin on the store until the next renewal.
      const next = mayClaim ? await store.nextProcessAfter(clock.now()).catch(() => null) : null;
      const untilNextMs = next === null ? Number.POSITIVE_INFINITY : next - clock.now();
      await this.claimWake.wait(Math.min(untilNextMs, config.leaseMs / 5));
    }
  }

  private sandboxDeps(): SandboxDeps {
    return {
      ...this.deps,
      installId: this.installId,
      workerId: this.id,
      secret: this.secret,
      workspaces: this.workspaces,
      cacheBudget: this.startedCacheBudget(),
      runnerDir: this.runnerDir,
      sandboxReports: this.sandboxReports,
      dataDir: this.startedDataDir(),
    };
  }

  private startedCacheBudget(): WorkspaceBudget {
    if (!this.cacheBudget)
      throw new BerthError('INTERNAL', `Worker ${this.id} has not made its workspace cache budget (start)`);
    return this.cacheBudget;
  }

  /** Never a blank identity: a resident workspace would be recorded as held by it. */
  private startedDataDir(): DataDirIdentity {
    if (!this.dataDir)
      throw new BerthError('INTERNAL', `Worker ${this.id} has not read its data dir identity (start)`);
    return this.dataDir;
  }

  private createPool(): WarmPool {
    const deps = this.sandboxDeps();
    let seq = 0;
    const log = this.log.child({ pool: true });
    const { slots, warmPool, warmPoolMin } = this.deps.config;
    const sizes = { min: warmPoolMin, max: slots === 0 ? 0 : warmPool };
    // What an agent that sets nothing gets: warm from the start.
    const defaultAgent = agentSpecSchema.parse({ name: 'default', provider: 'command' });
    const defaultProfile = profileOf(defaultAgent, this.deps.image);
    return new WarmPool(
      {
        clock: this.deps.clock,
        log,
        newLifecycle: () =>
          newSandboxLifecycle(deps, poolSandboxName(this.installId, this.id, ++seq), log, true),
        launch: (lifecycle, key, profile, onReady) =>
          launchSandbox(deps, {
            lifecycle,
            profile,
            pool: key,
            log: log.child({ sandbox: lifecycle.name }),
            onBootWaiting: onReady,
          }),
        dispose: async (sandbox) => {
          await this.deps.runtime.kill(sandbox.handle);
          await sandbox.gateway.close();
          await removeSandboxFiles(deps, sandbox.name);
        },
      },
      sizes,
      defaultProfile,
    );
  }

  private supervisorDeps(): SupervisorDeps {
    return {
      ...this.sandboxDeps(),
      slotWanted: async (sandbox) => {
        if (this.supervisors.size < this.deps.config.slots) return false;
        if ((await this.deps.store.queueDepth(this.deps.clock.now())) <= this.yielding.size) return false;
        this.yielding.add(sandbox);
        return true;
      },
    };
  }

  private supervise(supervisor: SessionSupervisor): void {
    this.supervisors.set(supervisor.session.id, supervisor);
    if (this.drainUntil !== null) supervisor.drain(this.drainUntil);
    const run = supervisor
      .run()
      .catch((err: unknown) =>
        this.log.error({ err, sessionId: supervisor.session.id }, 'Supervisor crashed'),
      )
      .finally(() => {
        // The session may already be re-claimed by a newer supervisor (its release wakes the claim loop).
        if (this.supervisors.get(supervisor.session.id) === supervisor)
          this.supervisors.delete(supervisor.session.id);
        this.yielding.delete(supervisor.sandboxName);
        this.running.delete(run);
        this.claimWake.notify();
      });
    this.running.add(run);
  }

  /**
   * Renews the worker's row every leaseMs / 5, by deadline: each renewal is due an interval
   * after the previous one was sent, however long that one took, and nothing else runs in
   * this loop. The store sends it on a connection of its own (Store.renewWorker), so no
   * queue of other calls delays it.
   */
  private async renewLoop(): Promise<void> {
    const { store, clock, config } = this.deps;
    const intervalMs = config.leaseMs / 5;
    let dueAt = performance.now() + intervalMs;
    while (!this.abort.signal.aborted) {
      await sleep(dueAt - performance.now(), this.abort.signal);
      if (this.abort.signal.aborted) return;
      this.renewalSentAt = performance.now();
      dueAt = this.renewalSentAt + intervalMs;
      const now = clock.now();
      try {
        if (await store.renewWorker(this.id, now)) {
          // A missed renewal (the store was away): everyone's row went stale with ours.
          if (now - this.heartbeatAt > 2 * intervalMs) this.storeReachableSince = now;
          this.heartbeatAt = now;
          this.loopDelay.reset();
        } else await this.rejoin(now);
      } catch (err) {
        this.log.warn({ err }, 'Lease renewal failed');
      } finally {
        this.renewalSentAt = null;
      }
    }
  }

  /**
   * Every leaseMs / 5, the sweep of dead workers' leases into the queue, and every 5th time
   * the clean-up of local leftovers; on a timer of their own, so neither delays a renewal.
   */
  private async sweepLoop(): Promise<void> {
    const { store, clock, config } = this.deps;
    for (let tick = 1; !this.abort.signal.aborted; tick++) {
      await sleep(config.leaseMs / 5, this.abort.signal);
      if (this.abort.signal.aborted) return;
      try {
        if (this.drainUntil === null && (await store.getWorker(this.id))?.drainingSince != null)
          this.drainAsked();
        await this.settleLayersOfLostMachines(await store.reclaimExpiredLeases(clock.now()));
      } catch (err) {
        this.log.warn({ err }, 'Sweep of expired leases failed');
        continue;
      }
      // Not awaited: its Docker kills (of a dead worker's sandboxes) must not hold up the next sweep.
      if (tick % CLEANUP_EVERY_SWEEPS === 0 && !this.cleaning)
        this.cleaning = this.cleanUpLocal()
          .catch((err: unknown) => this.log.warn({ err }, 'Clean-up of local leftovers failed'))
          .finally(() => {
            this.cleaning = null;
          });
    }
  }

  /**
   * A session taken over from a dead worker may still owe the promotion of its last committed
   * layer (pendingLayer), which only the machine holding the layer can apply. A layer on this
   * machine's disk is promoted by the clean-up (or the session's next owner). One that is not
   * here was sealed on another machine, which may be gone for good (a lost node): the layer
   * is in the session's chain, and every machine's copy catches up from there before its next
   * turn, so the debt is settled now instead of waiting for the session's next message.
   */
  private async settleLayersOfLostMachines(sessionIds: string[]): Promise<void> {
    const { store, clock } = this.deps;
    for (const sessionId of sessionIds) {
      const turnId = (await store.getSessionView(sessionId, clock.now()))?.pendingLayer;
      if (!turnId || (await this.workspaces.hasLayer(sessionId, turnId))) continue;
      await store.markLayerPromoted(sessionId, turnId);
      this.log.info({ sessionId, turnId }, 'Layer of a lost machine settled from the chain');
    }
  }

  /**
   * Deletes blob-store objects nothing names any more: storage blobs no object names (puts
   * fenced off, objects overwritten or deleted), workspace layers and snapshots no chain
   * names (uploads whose commit never came, chains compacted), chat files no message or
   * outbox row still needs. Past the grace period only; in the shared blob store every
   * worker's pass is safe.
   */
  private async blobGcLoop(): Promise<void> {
    const { store, clock, blobs } = this.deps;
    while (!this.abort.signal.aborted) {
      try {
        const storage = await this.storageBlobs.collectGarbage(
          (blob) => store.isStorageBlobNamed(blob),
          clock.now(),
        );
        let workspace = 0;
        for (const prefix of WORKSPACE_OBJECT_PREFIXES)
          workspace += await collectGarbage(blobs, {
            prefix,
            isNamed: (key) => store.isWorkspaceObjectNamed(key),
            now: clock.now(),
          });
        const checkpoints = await this.sweepCheckpoints();
        const channelFiles = await collectChannelFiles(store, blobs, clock.now());
        if (storage + workspace + checkpoints + channelFiles > 0)
          this.log.info({ storage, workspace, checkpoints, channelFiles }, 'Collected blob-store garbage');
      } catch (err) {
        this.log.warn({ err }, 'Blob-store garbage collection failed');
      }
      await sleep(BLOB_GC_INTERVAL_MS, this.abort.signal);
    }
  }

  /**
   * Checkpoints of work that ended without a commit (failed, cancelled, interrupted): their
   * rows, then their objects (each named by one upload alone, so deleting them at once is
   * safe). Then objects no row names, past the grace period: uploads whose record never came.
   */
  private async sweepCheckpoints(): Promise<number> {
    const { store, clock, blobs } = this.deps;
    const swept = await store.sweepCheckpoints();
    for (const key of swept.filter(Boolean)) await blobs.delete(key);
    const unnamed = await collectGarbage(blobs, {
      prefix: CHECKPOINT_OBJECT_PREFIX,
      isNamed: (key) => store.isCheckpointObjectNamed(key),
      now: clock.now(),
    });
    return swept.length + unnamed;
  }

  /**
   * Self-fencing on a timer of its own: a renewal stuck on a store that does not answer
   * (a PostgreSQL restart) must not delay it. The lease's age is the store's clock now
   * minus the heartbeat the store holds, as every other worker reckons it.
   */
  private async selfFenceLoop(): Promise<void> {
    const { clock, config } = this.deps;
    while (!this.abort.signal.aborted) {
      await sleep(config.leaseMs / 10, this.abort.signal);
      const now = clock.now();
      if (decideOwnLease(this.heartbeatAt, now, config.leaseMs) === 'fence' && this.supervisors.size > 0) {
        const leaseAgeMs = now - this.heartbeatAt;
        const sent = this.renewalSentAt;
        // In flight: the store is slow or away; none: this process did not get to send one.
        const renewalInFlightMs = sent === null ? null : Math.round(performance.now() - sent);
        // Since the last renewal: a long one says this process was not run (CPU starved, paused).
        const loopDelayMaxMs = Math.round(this.loopDelay.max / 1e6);
        this.log.error({ leaseAgeMs, renewalInFlightMs, loopDelayMaxMs }, SELF_FENCE_LOG);
        for (const s of this.supervisors.values()) s.stop('LeaseLost');
      }
    }
  }

  /**
   * Our row was deleted (we were silent for long, e.g. a paused VM): our sessions were
   * taken over, so every supervision ends, and we come back as a worker with no sessions.
   */
  private async rejoin(now: number): Promise<void> {
    this.log.error('Worker row gone: ending own sessions and registering again');
    for (const s of this.supervisors.values()) s.stop('LeaseLost');
    await this.register(now);
    // The row's heartbeat: without it the self-fence would stop the next claim at once.
    this.heartbeatAt = now;
  }

  /** This worker's row, with where its control endpoint listens and the key it takes. */
  private register(now: number): Promise<void> {
    return this.deps.store.registerWorker({
      id: this.id,
      host: hostname(),
      pid: process.pid,
      slots: this.deps.config.slots,
      heartbeatAt: now,
      startedAt: now,
      control: { url: this.controlUrl, key: this.controlKey },
    });
  }

  private async watchRuntime(connected: WakeSignal): Promise<void> {
    while (!this.abort.signal.aborted) {
      try {
        const since = this.lastEventAt === 0 ? undefined : this.lastEventAt - 1000;
        for await (const event of this.deps.runtime.events(this.installId, this.abort.signal, since)) {
          this.lastEventAt = Math.max(this.lastEventAt, event.at);
          if (event.type === 'connected') {
            connected.notify();
            continue;
          }
          if (event.type === 'disconnected') {
            this.log.warn({ error: event.error }, 'Runtime event stream lost; reconnecting');
            break;
          }
          const supervisor = [...this.supervisors.values()].find((s) => s.sandboxName === event.name);
          if (supervisor) supervisor.onSandboxExit(event);
          else this.pool?.onSandboxExit(event.name);
        }
      } catch (err) {
        this.log.warn({ err }, 'Runtime event stream failed; reconnecting');
      }
      await sleep(1000, this.abort.signal);
    }
  }

  /** Local leftovers of dead workers (local-cleanup.ts); heartbeats are judged only a lease after the store came back. */
  private async cleanUpLocal(): Promise<void> {
    const { clock, config } = this.deps;
    if (clock.now() - this.storeReachableSince < config.leaseMs) return;
    await cleanUpLocalLeftovers(this.deps, this.workspaces, {
      workerId: this.id,
      installId: this.installId,
      sandboxesInUse: () => {
        const names = new Set([...this.supervisors.values()].map((s) => s.sandboxName));
        for (const name of this.pool?.names() ?? []) names.add(name);
        return names;
      },
      isSupervised: (sessionId) => this.supervisors.has(sessionId),
      log: this.log,
    });
  }
}
