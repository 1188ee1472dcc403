/**
 * sandbox-kill: every A–B seconds (uniform), `docker kill` (Engine API) of one random
 * running container carrying this install's label, on the host's engine or each live
 * node's. With `runningTurns`, every other kill aims at a sandbox running a turn (waiting
 * until one runs), and no kill touches the sandbox of a turn on its messages' last try: a
 * run tests recovery, and a message whose every try was killed fails by design (the tries
 * limit), which no verdict of "every request ok" could then allow. With `longTurnsDue`,
 * the turn of each long session it names is killed as soon as it is named, once, besides
 * the kills of the interval: midway through, when its resume has calls to redo or not.
 *
 * Invariants:
 * - Only containers labelled `berth.install=<installId>` of an engine the run gave are
 *   ever touched.
 * - A kill a busy engine answers late is recorded when it answers (settled() waits for
 *   it), never dropped: the turn it ended would otherwise count as an abort no fault explains.
 */

import type Dockerode from 'dockerode';
import { LABELS, sleep } from '../../core/index.js';
import type { RunningTurn, RunningTurns, SandboxEngine } from '../fault-records.js';
import {
  ENGINE_TIMEOUT_MS,
  type FaultContext,
  FRESH_TURN_MS,
  newestStart,
  runningSandboxes,
  runningTurnsOrNone,
} from './fault-context.js';

export interface SandboxKillOptions {
  /** Interval between sandbox kills, ms, drawn uniformly from [min, max]. */
  killEveryMs: { min: number; max: number };
  /**
   * With these, every other sandbox kill aims at a sandbox running a turn (one that started
   * last, when there is one): a run's sandboxes are mostly warm or between turns, and kills
   * at random alone may all miss (8 of 8 did once). The others stay at random. Without
   * them, no turn's last try is known, and none is spared.
   */
  runningTurns?: RunningTurns;
  /**
   * The long sessions (long-turns.ts) whose turn is midway now (polled every tick; cheap):
   * each one's running turn is killed once. A long turn runs a few seconds among many short
   * ones, and kills at an interval, aimed at the newest turn, missed both of a run's.
   * Needs `runningTurns`, which says where the turn runs.
   */
  longTurnsDue?: () => string[];
}

/** How long a sandbox kill's answer is waited for (in the background, past ENGINE_TIMEOUT_MS). */
const KILL_ANSWER_TIMEOUT_MS = 60_000;
/** When no sandbox is running, look again this soon instead of waiting a whole interval. */
const RETRY_NO_TARGET_MS = 250;

export class SandboxKillFault {
  /** Kill attempts that found no running sandbox or raced its end. */
  skipped = 0;
  /** Kills the engine has not answered yet. */
  private readonly underWay = new Set<Promise<boolean>>();
  /** Kills tried on a running sandbox: the first and every other one are aimed (runningTurns). */
  private tried = 0;
  private nextKillAt = Number.POSITIVE_INFINITY;
  /** Long sessions whose turn was killed (longTurnsDue). */
  private readonly longKilled = new Set<string>();

  constructor(
    private readonly opts: SandboxKillOptions,
    private readonly ctx: FaultContext,
  ) {
    const { min, max } = opts.killEveryMs;
    if (!(min > 0 && max >= min))
      throw new RangeError(`kill interval must be 0 < min <= max, got ${min}-${max} ms`);
  }

  /** The first kill is due an interval from now. */
  schedule(): void {
    this.nextKillAt = this.ctx.clock.now() + this.interval();
  }

  /** How long until the next kill is due, ms (0 or less: now). */
  dueInMs(): number {
    return this.nextKillAt - this.ctx.clock.now();
  }

  /** Kills a sandbox once one is due; the next is due an interval later, or soon when none was running. */
  async tick(): Promise<void> {
    await this.killDueLongTurn().catch((err: unknown) => {
      this.ctx.warn(`sandbox kill of a long turn failed: ${(err as Error).message}`);
    });
    if (this.ctx.clock.now() < this.nextKillAt) return;
    const hit = await this.killOne().catch((err: unknown) => {
      this.ctx.warn(`sandbox kill failed: ${(err as Error).message}`);
      return false;
    });
    this.nextKillAt = this.ctx.clock.now() + (hit ? this.interval() : RETRY_NO_TARGET_MS);
  }

  /** Resolves once the engine answered every kill. */
  async settled(): Promise<void> {
    await Promise.all(this.underWay);
  }

  private interval(): number {
    const { min, max } = this.opts.killEveryMs;
    return min + this.ctx.random() * (max - min);
  }

  /**
   * True when a container was killed, or its kill is still under way after ENGINE_TIMEOUT_MS:
   * a busy engine may carry a kill out after any wait, so the call is not abandoned but
   * recorded when it answers (settled() waits for it); only an error or a container already
   * gone means nothing was killed.
   */
  private async killOne(): Promise<boolean> {
    const turns = await this.runningTurns();
    const spared = new Set(turns.filter((t) => t.lastTry).map((t) => t.sandbox));
    const running = (await runningSandboxes(this.ctx)).filter((c) => !named(c, spared));
    if (running.length === 0) {
      this.skipped++;
      return false;
    }
    const aiming = this.opts.runningTurns !== undefined && this.tried % 2 === 0;
    const aimed = new Set(aiming ? newestSandboxes(turns.filter((t) => !t.lastTry)) : []);
    const candidates = running.filter((c) => named(c, aimed));
    // An aimed kill waits for a turn to run (looked for again soon): fired at an idle sandbox
    // instead, a short run's kills may all miss, and a kind asked for must bite.
    if (aiming && candidates.length === 0) return false;
    this.tried++;
    const pool = candidates.length > 0 ? candidates : running;
    return this.kill(pool[Math.floor(this.ctx.random() * pool.length)]!);
  }

  /** Kills the running turn of a long session longTurnsDue names, once per session; false when there is none. */
  private async killDueLongTurn(): Promise<boolean> {
    const due = (this.opts.longTurnsDue?.() ?? []).filter((id) => !this.longKilled.has(id));
    if (due.length === 0) return false;
    const turns = (await this.runningTurns()).filter((t) => due.includes(t.sessionId) && !t.lastTry);
    const running = await runningSandboxes(this.ctx);
    for (const t of turns) {
      const target = running.find((c) => named(c, new Set([t.sandbox])));
      if (!target) continue;
      this.longKilled.add(t.sessionId);
      return this.kill(target);
    }
    return false;
  }

  /** Kills the container; see killOne for what the answer means. */
  private kill({
    engine,
    info: target,
  }: {
    engine: SandboxEngine;
    info: Dockerode.ContainerInfo;
  }): Promise<boolean> {
    const at = this.ctx.clock.now();
    const answered = engine.docker
      .getContainer(target.Id)
      .kill({ abortSignal: AbortSignal.timeout(KILL_ANSWER_TIMEOUT_MS) })
      .then(
        () => {
          this.ctx.faults.push({
            kind: 'sandbox-kill',
            at,
            killedAt: this.ctx.clock.now(),
            container: (target.Names[0] ?? target.Id).replace(/^\//, ''),
            warm: LABELS.pool in target.Labels,
            workerId: target.Labels[LABELS.worker] ?? '',
          });
          return true;
        },
        (err: unknown) => {
          // 404/409: it ended on its own (turn done, supervisor killed it) between list and kill.
          const status = (err as { statusCode?: number }).statusCode;
          if (status !== 404 && status !== 409)
            this.ctx.warn(`sandbox kill failed: ${(err as Error).message}`);
          this.skipped++;
          return false;
        },
      );
    this.underWay.add(answered);
    void answered.finally(() => this.underWay.delete(answered));
    return Promise.race([answered, sleep(ENGINE_TIMEOUT_MS).then(() => true)]);
  }

  private async runningTurns(): Promise<RunningTurn[]> {
    const runningTurns = this.opts.runningTurns;
    return runningTurns ? [...(await runningTurnsOrNone(runningTurns)).values()].flat() : [];
  }
}

/** Whether the container has one of these names. */
function named(c: { info: { Names: string[] } }, names: ReadonlySet<string>): boolean {
  return c.info.Names.some((n) => names.has(n.replace(/^\//, '')));
}

/** The sandboxes of the newest of these turns (the one started last, and any within FRESH_TURN_MS of it). */
function newestSandboxes(turns: RunningTurn[]): string[] {
  const newest = newestStart(turns);
  return turns.filter((t) => newest - t.startedAt <= FRESH_TURN_MS).map((t) => t.sandbox);
}
