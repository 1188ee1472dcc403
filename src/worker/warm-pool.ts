/**
 * The warm pool: per profile (image + resources), sandboxes created, started and with
 * the runner booted, bound to no session. Taking one is synchronous and costs no engine
 * call: the session's workspace is mounted on its slot and its binding is a message on its
 * gateway. Only sandboxes whose runner is waiting on GET /v1/bind right now are handed
 * out, so a sandbox that died in the pool is never bound; its exit removes it and the pool
 * refills. A sandbox leaves the pool once, for one session, and is never returned. Each
 * entry's phase is its sandbox lifecycle's: creating, warm (ready when its runner waits),
 * or draining once it died, hung or is no longer wanted, then gone.
 *
 * The target per profile adapts to demand: the takes of the last minute (counting takes
 * that found the pool empty), at least `sizes.min` for a profile used in the last ten
 * minutes and for the default profile, at most `sizes.max`.
 */
import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import {
  backoffMs,
  type Clock,
  decideWarmPoolTarget,
  type PoolEndReason,
  type SandboxLifecycle,
  WakeSignal,
} from '../core/index.js';
import type { LaunchedSandbox, SandboxProfile } from './sandbox-launch.js';

const DEMAND_WINDOW_MS = 60_000;
const KEEP_PROFILE_MS = 10 * 60_000;
/** After a failed create or disposal, before the next try. */
const REFILL_BACKOFF = { firstMs: 1_000, maxMs: 30_000 };
const STOP_CONCURRENCY = 8;
/** A warm sandbox whose runner has not asked for a binding for this long is replaced. */
const BOOT_TIMEOUT_MS = 60_000;

export interface WarmPoolDeps {
  clock: Clock;
  log: Logger;
  /** Starts an unbound sandbox; `onReady` fires each time its runner waits for a binding. */
  launch(
    lifecycle: SandboxLifecycle,
    key: string,
    profile: SandboxProfile,
    onReady: () => void,
  ): Promise<LaunchedSandbox>;
  /** Kills a sandbox that left the pool unbound and removes its files (why is its lifecycle's). */
  dispose(sandbox: LaunchedSandbox): Promise<void>;
  /** The lifecycle of a new sandbox, under a fresh, never reused name. */
  newLifecycle(): SandboxLifecycle;
}

interface Entry {
  lifecycle: SandboxLifecycle;
  /** null while the engine is still creating it. */
  sandbox: LaunchedSandbox | null;
  /** Last time its runner was seen waiting for a binding (or when it was launched). */
  seenAt: number;
}

/** Ready to bind now: started, and its runner waits on GET /v1/bind. */
function isReady(e: Entry): boolean {
  return e.sandbox !== null && e.lifecycle.ready;
}

/** Leaves the pool for good: drained (with the first reason it got), never handed out. */
function drain(e: Entry, reason: PoolEndReason | 'WorkerStopping', message: string): void {
  e.lifecycle.drain({ reason, message });
}

interface ProfilePool {
  profile: SandboxProfile;
  entries: Entry[];
  /** Times of recent takes (including misses), for the adaptive target. */
  takes: number[];
  lastUsedAt: number;
  isDefault: boolean;
}

export interface WarmPoolStats {
  /** Sandboxes ready to bind now. */
  ready: number;
  /** Created or being created, not yet ready. */
  starting: number;
  hits: number;
  misses: number;
}

export class WarmPool {
  private readonly pools = new Map<string, ProfilePool>();
  private readonly byName = new Map<string, { key: string; entry: Entry }>();
  private readonly wake = new WakeSignal();
  private stopped = false;
  private loop: Promise<void> | null = null;
  private hits = 0;
  private misses = 0;

  constructor(
    private readonly deps: WarmPoolDeps,
    private readonly sizes: { min: number; max: number },
    defaultProfile: SandboxProfile,
  ) {
    if (sizes.max > 0) this.poolOf(defaultProfile).isDefault = true;
  }

  static keyOf(profile: SandboxProfile): string {
    const { image, memoryMb, cpus, pidsLimit, workspaceMb, isolation, mounts } = profile;
    return createHash('sha256')
      .update(JSON.stringify([image, memoryMb, cpus, pidsLimit, workspaceMb, isolation, mounts]))
      .digest('hex')
      .slice(0, 12);
  }

  start(): void {
    if (this.sizes.max > 0) this.loop = this.refillLoop();
  }

  /** A ready sandbox of this profile, now out of the pool for good; null = start a cold one. */
  take(profile: SandboxProfile): LaunchedSandbox | null {
    if (this.sizes.max === 0) return null;
    const pool = this.poolOf(profile);
    const now = this.deps.clock.now();
    pool.takes.push(now);
    pool.lastUsedAt = now;
    const index = pool.entries.findIndex(isReady);
    this.wake.notify();
    if (index < 0) {
      this.misses++;
      return null;
    }
    const [entry] = pool.entries.splice(index, 1);
    this.byName.delete(entry!.lifecycle.name);
    this.hits++;
    return entry!.sandbox;
  }

  /** True when the sandbox belonged to the pool: it is dropped and replaced. */
  onSandboxExit(name: string): boolean {
    const found = this.byName.get(name);
    if (!found) return false;
    drain(found.entry, 'DiedInPool', 'exited in the pool');
    this.deps.log.warn({ sandbox: name }, 'Warm sandbox died before binding; replacing it');
    this.wake.notify();
    return true;
  }

  /** Names of every sandbox the pool holds (their slots and run dirs are in use). */
  names(): string[] {
    return [...this.byName.keys()];
  }

  stats(): WarmPoolStats {
    let ready = 0;
    let starting = 0;
    for (const pool of this.pools.values())
      for (const e of pool.entries) {
        if (e.lifecycle.isEnding) continue;
        if (isReady(e)) ready++;
        else starting++;
      }
    return { ready, starting, hits: this.hits, misses: this.misses };
  }

  /** Stops refilling and disposes of every pooled sandbox. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.notify();
    await this.loop;
    const all = [...this.pools.values()].flatMap((p) => p.entries.splice(0));
    this.byName.clear();
    // A few at a time: hundreds of parallel stops would only queue up in the engine.
    const entries = all.filter((e) => e.sandbox !== null);
    const disposeNext = async (): Promise<void> => {
      for (let e = entries.pop(); e; e = entries.pop()) {
        const entry = e;
        drain(entry, 'WorkerStopping', 'worker stopping');
        await this.disposeOf(entry).catch((err: unknown) => {
          this.deps.log.warn({ err, sandbox: entry.lifecycle.name }, 'Could not dispose of a warm sandbox');
        });
      }
    };
    await Promise.all(Array.from({ length: STOP_CONCURRENCY }, disposeNext));
  }

  private poolOf(profile: SandboxProfile): ProfilePool {
    const key = WarmPool.keyOf(profile);
    let pool = this.pools.get(key);
    if (!pool) {
      pool = { profile, entries: [], takes: [], lastUsedAt: 0, isDefault: false };
      this.pools.set(key, pool);
    }
    return pool;
  }

  /** One sandbox at a time: on two cores, parallel creates only slow each other (and cold starts) down. */
  private async refillLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        await this.dropDeadAndSurplus();
        const next = this.mostWanted();
        if (!next) {
          // Demand decays with time: re-check now and then even when nothing happens.
          await this.wake.wait(DEMAND_WINDOW_MS / 4);
          continue;
        }
        await this.fill(next.key, next.pool);
        failures = 0;
      } catch (err) {
        // Nothing here may end the loop (or the process): a failed create or disposal is retried later.
        failures++;
        const delayMs = backoffMs(failures, REFILL_BACKOFF);
        this.deps.log.error(
          { err, delayMs },
          'Warm pool could not start or dispose of a sandbox; retrying later',
        );
        await this.wake.wait(delayMs);
      }
    }
  }

  private targetOf(pool: ProfilePool, now: number): number {
    pool.takes = pool.takes.filter((at) => now - at < DEMAND_WINDOW_MS);
    return decideWarmPoolTarget({
      recentTakes: pool.takes.length,
      inUse: pool.isDefault || now - pool.lastUsedAt < KEEP_PROFILE_MS,
      ...this.sizes,
    });
  }

  /** The profile furthest below its target, if any. */
  private mostWanted(): { key: string; pool: ProfilePool } | null {
    const now = this.deps.clock.now();
    let best: { key: string; pool: ProfilePool; missing: number } | null = null;
    for (const [key, pool] of this.pools) {
      const missing = this.targetOf(pool, now) - pool.entries.length;
      if (missing > 0 && (!best || missing > best.missing)) best = { key, pool, missing };
    }
    return best;
  }

  private async fill(key: string, pool: ProfilePool): Promise<void> {
    const entry: Entry = {
      lifecycle: this.deps.newLifecycle(),
      sandbox: null,
      seenAt: this.deps.clock.now(),
    };
    pool.entries.push(entry);
    this.byName.set(entry.lifecycle.name, { key, entry });
    const onReady = () => {
      entry.seenAt = this.deps.clock.now();
      this.wake.notify();
    };
    try {
      entry.sandbox = await this.deps.launch(entry.lifecycle, key, pool.profile, onReady);
    } catch (err) {
      this.remove(pool, entry);
      drain(entry, 'StartFailed', `did not start: ${(err as Error).message}`);
      entry.lifecycle.gone();
      throw err;
    }
    if (this.stopped) drain(entry, 'EndedWhileStarting', 'worker stopping');
    // Stopped, or exited, while it was being created: it never joins the pool.
    if (entry.lifecycle.isEnding) {
      this.remove(pool, entry);
      await this.disposeOf(entry);
      return;
    }
    entry.lifecycle.warm();
  }

  private async disposeOf(entry: Entry): Promise<void> {
    await this.deps.dispose(entry.sandbox!);
    entry.lifecycle.gone();
  }

  private async dropDeadAndSurplus(): Promise<void> {
    const now = this.deps.clock.now();
    for (const pool of this.pools.values()) {
      // A runner asks again at once after each long-poll: one silent this long is hung (or never booted).
      for (const e of pool.entries)
        if (e.sandbox && !e.lifecycle.runnerWaiting && now - e.seenAt > BOOT_TIMEOUT_MS)
          drain(e, 'HungInPool', `no GET /v1/bind for ${BOOT_TIMEOUT_MS / 1000} s`);
      let surplus = pool.entries.length - this.targetOf(pool, now);
      // Drained ones first, then the oldest.
      const draining = (e: Entry) => Number(e.lifecycle.isEnding);
      for (const entry of [...pool.entries].sort((a, b) => draining(b) - draining(a))) {
        if (!entry.lifecycle.isEnding && surplus <= 0) break;
        if (!entry.sandbox) continue;
        this.remove(pool, entry);
        surplus--;
        drain(entry, 'PoolShrinking', 'fewer warm sandboxes wanted');
        await this.disposeOf(entry);
      }
    }
  }

  private remove(pool: ProfilePool, entry: Entry): void {
    const index = pool.entries.indexOf(entry);
    if (index >= 0) pool.entries.splice(index, 1);
    this.byName.delete(entry.lifecycle.name);
  }
}
