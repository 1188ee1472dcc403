/**
 * `berth-checkpoint [LABEL]`: what a job runs inside the sandbox to checkpoint itself. It
 * asks the gateway (POST /v1/checkpoint, with the session token the runner gave every job
 * it starts) and returns once the checkpoint is durable: exit 0, or 1 with the reason on
 * stderr when it was not made (the job may go on; a retry resumes from the previous one).
 * Nothing goes to stdout: a job's stdout is its reply. Node built-ins only; ships into the
 * sandbox (staged as bin/berth-checkpoint, on every job's PATH).
 */
import { join } from 'node:path';
import {
  CHECKPOINT_PATH,
  type CheckpointTaken,
  GATEWAY_SOCKET_NAME,
  SANDBOX_RUN_DIR,
} from '../core/protocol.js';
import { GATEWAY_TOKEN_ENV } from './checkpoint-command-env.js';
import { GatewayClient, GatewayError } from './gateway-client.js';

/** Large checkpoints take as long as their upload; the gateway's own waits for the blob store are shorter. */
const CHECKPOINT_TIMEOUT_MS = 300_000;

async function main(): Promise<number> {
  const label = process.argv.slice(2).join(' ');
  const token = process.env[GATEWAY_TOKEN_ENV];
  if (!token) {
    process.stderr.write(
      `berth-checkpoint: ${GATEWAY_TOKEN_ENV} is not set: run it from a job berth started\n`,
    );
    return 2;
  }
  const runDir = process.env.BERTH_RUN_DIR ?? SANDBOX_RUN_DIR;
  const gateway = new GatewayClient(join(runDir, GATEWAY_SOCKET_NAME), token);
  try {
    const { body } = await gateway.call<CheckpointTaken>(
      'POST',
      CHECKPOINT_PATH,
      { label },
      CHECKPOINT_TIMEOUT_MS,
    );
    process.stderr.write(
      `berth-checkpoint: checkpoint ${body!.count} (${JSON.stringify(label)}) is durable: ${body!.bytes} bytes in ${body!.ms} ms\n`,
    );
    return 0;
  } catch (err) {
    process.stderr.write(`berth-checkpoint: not made: ${reasonOf(err)}\n`);
    return 1;
  }
}

function reasonOf(err: unknown): string {
  if (!(err instanceof GatewayError)) return (err as Error).message;
  try {
    const { code, message } = JSON.parse(err.body) as { code?: string; message?: string };
    return `${code ?? err.status}: ${message ?? err.body}`;
  } catch {
    return err.message;
  }
}

process.exitCode = await main();
