/**
 * Commands a client runs in this live sandbox (POST /v1/sessions/:id/exec), served beside
 * the turn loop: a long-poll on GET /v1/exec hands over each command, which runs as a job
 * like a `command` turn's (its own process group, confined, its output capped), its
 * output posted back in order as it comes and its end after all of it. A cancel kills the
 * command's process group. Commands run concurrently with each other and with turns.
 * Node built-ins only; ships into the sandbox.
 */
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { type ExecExit, type ExecOffer, type ExecOutput, SANDBOX_WORKSPACE } from '../core/protocol.js';
import { type GatewayClient, isRevoked } from './gateway-client.js';
import { LimitExceeded } from './limits.js';
import { runShell } from './processes.js';

/** After a failed poll (not a revocation): the gateway may be busy or restarting its listener. */
const POLL_RETRY_MS = 1000;

/** Serves commands until the gateway revokes this sandbox (rejects with that error). */
export async function serveExecs(gateway: GatewayClient): Promise<never> {
  const running = new Map<string, AbortController>();
  for (;;) {
    let offer: ExecOffer | null;
    try {
      offer = (await gateway.call<ExecOffer>('GET', '/v1/exec')).body;
    } catch (err) {
      if (isRevoked(err)) throw err;
      await new Promise((r) => setTimeout(r, POLL_RETRY_MS));
      continue;
    }
    if (!offer) continue;
    if (offer.kind === 'cancel') {
      running.get(offer.execId)?.abort();
      continue;
    }
    const abort = new AbortController();
    running.set(offer.execId, abort);
    void runExec(gateway, offer, abort.signal).finally(() => running.delete(offer.execId));
  }
}

async function runExec(
  gateway: GatewayClient,
  offer: Extract<ExecOffer, { kind: 'start' }>,
  signal: AbortSignal,
): Promise<void> {
  const { execId } = offer;
  const output = new OutputSender(gateway, execId);
  let exit: ExecExit;
  try {
    const cwd = join(SANDBOX_WORKSPACE, offer.cwd ?? '');
    if (!(await stat(cwd).catch(() => null))?.isDirectory())
      throw new Error(`cwd ${offer.cwd} is not a directory of the workspace`);
    const result = await runShell(offer.command, {
      cwd,
      maxOutputBytes: offer.maxOutputBytes,
      attempt: 0,
      timeoutMs: offer.timeoutMs,
      ...(offer.env ? { env: offer.env } : {}),
      onOutput: (stream, chunk) => output.push(stream, chunk),
      signal,
    });
    exit = {
      execId,
      exitCode: result.exitCode,
      ...(result.signal ? { signal: result.signal } : {}),
      ...(result.timedOut ? { timedOut: true } : {}),
    };
  } catch (err) {
    const code = err instanceof LimitExceeded ? 'OUTPUT_LIMIT_EXCEEDED' : 'EXEC_FAILED';
    exit = { execId, exitCode: null, error: { code, message: (err as Error).message } };
  }
  await output.flushed();
  await gateway.call('POST', '/v1/exec/exit', exit).catch(report);
}

/** Posts output in order, one request at a time; what comes while one is in flight goes in the next. */
class OutputSender {
  private readonly pending: ExecOutput[] = [];
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  private sending: Promise<void> = Promise.resolve();
  private pumping = false;

  constructor(
    private readonly gateway: GatewayClient,
    private readonly execId: string,
  ) {}

  push(stream: 'stdout' | 'stderr', chunk: Buffer): void {
    // A character split across two chunks is sent whole, with the second.
    const data = this.decoders[stream].write(chunk);
    if (data === '') return;
    const last = this.pending.at(-1);
    if (last?.stream === stream) last.data += data;
    else this.pending.push({ execId: this.execId, stream, data });
    if (!this.pumping) this.sending = this.pump();
  }

  async flushed(): Promise<void> {
    for (const stream of ['stdout', 'stderr'] as const) {
      const rest = this.decoders[stream].end();
      if (rest) this.pending.push({ execId: this.execId, stream, data: rest });
    }
    if (!this.pumping) this.sending = this.pump();
    await this.sending;
  }

  private async pump(): Promise<void> {
    this.pumping = true;
    try {
      for (let next = this.pending.shift(); next; next = this.pending.shift())
        await this.gateway.call('POST', '/v1/exec/output', next).catch(report);
    } finally {
      this.pumping = false;
    }
  }
}

function report(err: unknown): void {
  if (isRevoked(err)) return; // the heartbeat hears it too, and exits
  process.stderr.write(`berth-runner: exec: ${(err as Error).message}\n`);
}
