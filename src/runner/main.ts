/**
 * The agent runner: PID 2 of every sandbox (the init is PID 1). It boots before the
 * sandbox is bound to a session (a warm sandbox waits here), asks its gateway for the
 * binding with the boot token, then long-polls for turns with the session token. Each
 * turn it runs it with the agent's provider, commits or aborts, then kills
 * every process the turn started (a resident agent's survive a committed turn). Beside the
 * turns it serves commands a client runs in the live sandbox (exec-loop.ts). A heartbeat timer, independent of the work, tells
 * the worker it is alive. A 409 or 401 from the gateway means this sandbox was replaced
 * or revoked: it exits at once. Node built-ins only; ships into the sandbox.
 */
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  type BindAssignment,
  GATEWAY_SOCKET_NAME,
  type RunnerAbortCode,
  SANDBOX_WORKSPACE,
  TOKEN_FILE_NAME,
  type TurnAssignment,
} from '../core/protocol.js';
import { retryUntil } from '../core/retry.js';
import { GATEWAY_TOKEN_ENV } from './checkpoint-command-env.js';
import { serveExecs } from './exec-loop.js';
import { GatewayClient, GatewayError, isRevoked } from './gateway-client.js';
import { HarnessError } from './harness-process.js';
import { LimitExceeded, LimitWatch } from './limits.js';
import { startModelEndpoint } from './model-endpoint.js';
import { killAllButRunner, sandboxUsage } from './processes.js';
import { PROVIDERS, StepFailed } from './providers.js';
import { startEgressProxy } from './sandbox-http-proxy.js';
import { installTrustBundle } from './trust-bundle.js';

const runDir = process.env.BERTH_RUN_DIR ?? '/run/berth';
/** On the scratch tmpfs: the root file system is read-only. */
const TRUST_DIR = '/tmp/berth-ca';
/** The gateway's limit on a progress text. */
const MAX_PROGRESS_CHARS = 4096;
/** A failed step's record is tried this often, about 3 s in all, before the abort goes on without it. */
const FAILED_STEP_TRIES = 4;
const FAILED_STEP_BACKOFF = { firstMs: 250, maxMs: 2000 };
// The runner never stands in the workspace: a process there would keep the turn's overlay busy.
process.chdir('/');

async function main(): Promise<void> {
  const socketPath = join(runDir, GATEWAY_SOCKET_NAME);
  const binding = await waitForBinding(socketPath);
  const gateway = new GatewayClient(socketPath, binding.token);
  // Every tool the runner starts inherits its environment (processes.ts): berth-checkpoint
  // (bin/ beside the runner's code) on its PATH, with the session token it calls the gateway
  // with. The token is no secret from the sandbox's own processes: the runner runs as the
  // same user, and a harness holds it already as its model "API key".
  process.env.PATH = `${join(dirname(fileURLToPath(import.meta.url)), '..', 'bin')}:${process.env.PATH ?? ''}`;
  process.env[GATEWAY_TOKEN_ENV] = binding.token;
  if (binding.egressCaPem)
    Object.assign(process.env, await installTrustBundle(binding.egressCaPem, TRUST_DIR));
  await startEgressProxy(socketPath, binding.token);
  await startModelEndpoint(socketPath, binding.token);
  let currentTurn: string | undefined;
  const beat = async () => {
    const usage = binding.resident ? { usage: await sandboxUsage() } : {};
    await gateway
      .call('POST', '/v1/heartbeat', { ...(currentTurn ? { turnId: currentTurn } : {}), ...usage }, 5_000)
      .catch(exitIfRevoked);
  };
  let heartbeat = setInterval(beat, binding.heartbeatIntervalMs);
  void beat();
  // Commands a client runs in the live sandbox, beside the turns (exec-loop.ts).
  serveExecs(gateway).catch(exitIfRevoked);
  for (;;) {
    const polled = await gateway.call<TurnAssignment>('GET', '/v1/turn');
    if (polled.status !== 200 || !polled.body) continue;
    const turn = polled.body;
    clearInterval(heartbeat);
    heartbeat = setInterval(beat, turn.limits.heartbeatIntervalMs);
    currentTurn = turn.turnId;
    const limits = await LimitWatch.start();
    try {
      const outputs = await PROVIDERS[turn.provider](turn, {
        workspace: SANDBOX_WORKSPACE,
        gateway,
        progress: async (text) =>
          void (await gateway.call('POST', '/v1/progress', { turnId: turn.turnId, text })),
        getState: (key) => getState(gateway, key),
        putState: async (key, value) =>
          void (await gateway.call('PUT', `/v1/state/${encodeURIComponent(key)}`, { value })),
        resident: binding.resident === true,
      });
      // A resident agent's processes outlive its turns (docs/resident.md).
      if (!binding.resident) await killAllButRunner();
      const breach = await limits.breach();
      if (breach) throw breach;
      await gateway.call('POST', '/v1/commit', { turnId: turn.turnId, outputs });
    } catch (err) {
      if (err instanceof GatewayError) throw err;
      const failure = err as Error;
      // First, before the clean-up: a failed step is then in the store even if the sandbox dies before its abort.
      // Tried a few times; a record that still fails leaves the abort below to say STEP_FAILED.
      if (failure instanceof StepFailed)
        await retryUntil(
          () =>
            gateway.call('POST', '/v1/progress', {
              turnId: turn.turnId,
              text: failure.message.slice(0, MAX_PROGRESS_CHARS),
              failedStep: failure.step,
            }),
          { retryable: (e) => !isRevoked(e), backoff: FAILED_STEP_BACKOFF, tries: FAILED_STEP_TRIES },
        ).catch((e: unknown) => {
          if (isRevoked(e)) throw e;
          process.stderr.write(
            `berth-runner: the failed step could not be recorded: ${(e as Error).message}\n`,
          );
        });
      await killAllButRunner();
      // A sandbox limit the turn hit (kernel counters) decides the code, the output limit included: a fork
      // bomb's endless "fork: retry" lines are a symptom, not the cause. The turn's own error stays in the text.
      const breach = (await limits.breach()) ?? (failure instanceof LimitExceeded ? failure : null);
      const code = breach?.code ?? abortCodeOf(failure);
      const error =
        breach && breach !== failure
          ? `${breach.message}; the turn failed with: ${failure.message}`
          : failure.message;
      await gateway.call('POST', '/v1/abort', { turnId: turn.turnId, error, code });
    } finally {
      currentTurn = undefined;
    }
  }
}

/** Long-polls GET /v1/bind until the worker binds this sandbox to a session. */
async function waitForBinding(socketPath: string): Promise<BindAssignment> {
  const bootToken = (await readFile(join(runDir, TOKEN_FILE_NAME), 'utf8')).trim();
  const boot = new GatewayClient(socketPath, bootToken);
  for (;;) {
    const polled = await boot.call<BindAssignment>('GET', '/v1/bind');
    if (polled.status === 200 && polled.body) return polled.body;
  }
}

async function getState(gateway: GatewayClient, key: string): Promise<unknown> {
  try {
    return (await gateway.call<{ value: unknown }>('GET', `/v1/state/${encodeURIComponent(key)}`)).body
      ?.value;
  } catch (err) {
    if (err instanceof GatewayError && err.status === 404) return undefined;
    throw err;
  }
}

/** The catalogue code the runner's own failures carry; none (the gateway records TURN_FAILED) for anything else. */
function abortCodeOf(err: Error): RunnerAbortCode | undefined {
  return err instanceof LimitExceeded || err instanceof HarnessError || err instanceof StepFailed
    ? err.code
    : undefined;
}

function exitIfRevoked(err: unknown): void {
  if (isRevoked(err)) {
    process.stderr.write(`berth-runner: ${err.message}; exiting\n`);
    process.exit(3);
  }
}

main().catch((err: unknown) => {
  exitIfRevoked(err);
  process.stderr.write(`berth-runner: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
