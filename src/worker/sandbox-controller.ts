/**
 * The sandbox of one session's supervision, and every move of its lifecycle that the
 * supervision makes: started cold unless one was taken warm, bound to the session, handed
 * turns, fenced (killed hard at once when the worker's lease lapses), drained with the
 * ending decideSupervision chose, killed, and gone. The supervisor decides; this acts on
 * the sandbox, and its lifecycle (core/sandbox-lifecycle.ts) holds what it is.
 */
import type { Logger } from 'pino';
import {
  BerthError,
  type Ending,
  type SandboxLifecycle,
  type Session,
  type TurnInFlight,
} from '../core/index.js';
import type { ExecRelay, GatewayBinding } from '../gateway/index.js';
import type { SandboxDeps } from './deps.js';
import {
  type LaunchedSandbox,
  launchSandbox,
  newSandboxLifecycle,
  type SandboxProfile,
} from './sandbox-launch.js';

export class SandboxController {
  constructor(
    private readonly deps: SandboxDeps,
    readonly name: string,
    private readonly session: Session,
    private readonly profile: SandboxProfile,
    private readonly log: Logger,
    /** Taken from the warm pool for this session; null = started cold at the first bind. */
    private sandbox: LaunchedSandbox | null,
  ) {}

  get lifecycle(): SandboxLifecycle | null {
    return this.sandbox?.lifecycle ?? null;
  }

  get isBound(): boolean {
    return this.sandbox?.lifecycle.isBound ?? false;
  }

  /** Its gateway's command relay while it is bound and not ending (a command may run in it); null otherwise. */
  get execRelay(): ExecRelay | null {
    const s = this.sandbox;
    return s?.lifecycle.isBound && !s.lifecycle.isEnding ? s.gateway.exec : null;
  }

  /** The turn it serves. */
  get turn(): TurnInFlight | null {
    return this.sandbox?.lifecycle.turn ?? null;
  }

  /**
   * Starts a cold sandbox unless a warm one was taken, then binds it to the session: the
   * gateway answers the runner's GET /v1/bind with the session token. `onChange` hears
   * every move after (the turn's outcome, written by the gateway, among them).
   */
  async bind(binding: GatewayBinding, o: { onChange: () => void; fenceRequested: () => boolean }) {
    if (!this.sandbox) {
      this.sandbox = await launchSandbox(this.deps, {
        lifecycle: newSandboxLifecycle(this.deps, this.name, this.log, false),
        profile: this.profile,
        log: this.log,
        binding: { sessionId: this.session.id, generation: this.session.generation },
      });
      // A self-fence during the launch found no sandbox to kill: this one dies now, never bound
      // (a chaos partition found such a sandbox running its turn a lease after the cut).
      if (o.fenceRequested()) {
        this.fence();
        throw new BerthError('WORKER_FENCED', 'lease lost while the sandbox started');
      }
    }
    const { gateway, lifecycle } = this.sandbox;
    lifecycle.onChange(o.onChange);
    gateway.bind(binding);
    lifecycle.bind({ sessionId: this.session.id, generation: this.session.generation });
  }

  serve(turn: TurnInFlight): void {
    this.sandbox!.lifecycle.serve(turn);
  }

  /** The turn committed and the sandbox serves on. */
  turnDone(): void {
    this.sandbox!.lifecycle.turnDone();
  }

  /**
   * Self-fencing: the sandbox dies now, whatever the supervision is waiting for (a store out
   * of reach). Also when it is already draining: an ending that came first (a store call that
   * failed in the partition) kills only after its store steps, which may wait a minute.
   */
  fence(): void {
    const sandbox = this.sandbox;
    if (!sandbox?.lifecycle.fence()) return;
    const startedAt = performance.now();
    this.deps.runtime.kill(sandbox.handle, { hard: true }).then(
      // Logged as loud as the fence: whether the sandbox died within the lease is the fence's whole point.
      () =>
        this.log.error({ killMs: Math.round(performance.now() - startedAt) }, 'Self-fenced sandbox killed'),
      (err: unknown) => this.log.warn({ err }, 'Self-fencing kill failed; the clean-up kills again'),
    );
  }

  /** The supervision ends: the sandbox drains with its reason (the first one, if it drains already). */
  drain(ending: Ending): void {
    this.sandbox?.lifecycle.drain({ reason: ending.reason, message: ending.message });
  }

  /**
   * Kills it (hard, without grace, when fencing); also a sandbox whose exit was seen though
   * its launch never returned, by its name.
   */
  async kill(o: { hard: boolean; exitSeen: boolean }): Promise<void> {
    if (!this.sandbox && !o.exitSeen) return;
    await this.deps.runtime.kill(this.sandbox?.handle ?? { id: '', name: this.name }, { hard: o.hard });
  }

  async closeGateway(): Promise<void> {
    await this.sandbox?.gateway.close();
  }

  /** Killed, its gateway closed, its files removed. */
  gone(): void {
    this.sandbox?.lifecycle.gone();
  }
}
