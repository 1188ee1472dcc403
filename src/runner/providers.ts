/**
 * Providers turn a turn's messages into outputs. `command` and `script` answer each
 * message with its own output, which names it (inReplyTo); a model or harness answers all
 * of its turn's messages at once. `command`: each message is a shell
 * job; its reply is the exit code and output, and the processes it left running.
 * `script`: each message is a JSON plan of
 * steps (run, sleep, write, append, progress, putState, assertFile, assertState), for
 * tests, demos, load and chaos; a failing step fails the turn with STEP_FAILED and says
 * which step as data (FailedStep). The asserts are how a test sees partial state: a turn
 * that finds anything but committed content fails.
 * `anthropic` and `openai`: model tool-use loops (their own modules). `claude-code`,
 * `codex` and `opencode`: harnesses run as they are (harness-provider.ts).
 */

import { appendFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import {
  ASSERTION_MAX_CHARS,
  CHECKPOINT_ENV,
  type CommandResult,
  checkpointEnvOf,
  type FailedStep,
  type ScriptPlan,
  type ScriptStep,
  type StepCode,
  type TurnAssignment,
  type TurnOutput,
} from '../core/protocol.js';
import { isRevoked } from './gateway-client.js';
import type { HarnessAdapter } from './harness-provider.js';
import { LimitExceeded } from './limits.js';
import { leftRunningOf, runShell } from './processes.js';
import type { TurnContext } from './turn-context.js';

export type Provider = (turn: TurnAssignment, ctx: TurnContext) => Promise<TurnOutput[]>;

export const PROVIDERS: Record<TurnAssignment['provider'], Provider> = {
  async command(turn, ctx) {
    const outputs: TurnOutput[] = [];
    // A retry resumed from a checkpoint: the job may skip what it did (docs: "Checkpoints for jobs").
    const env: Record<string, string> = turn.checkpoint
      ? { [CHECKPOINT_ENV]: checkpointEnvOf(turn.checkpoint) }
      : {};
    for (const message of turn.messages) {
      const { stdout, leftRunning, ...result } = await runShell(message.text, {
        cwd: ctx.workspace,
        maxOutputBytes: turn.limits.maxOutputBytes,
        attempt: turn.attempt,
        env,
      });
      const left = leftRunningOf(leftRunning, ctx.resident);
      const data: CommandResult = { ...result, ...(left ? { leftRunning: left } : {}) };
      outputs.push({ text: stdout, data, inReplyTo: [message.id] });
    }
    return outputs;
  },

  async script(turn, ctx) {
    const outputs: TurnOutput[] = [];
    for (const message of turn.messages) {
      const plan = parsePlan(message.id, message.text);
      for (const [index, step] of plan.steps.entries()) {
        const at = { messageId: message.id, index, kind: Object.keys(step)[0] ?? null };
        await runStep(step, at, turn, ctx).catch((err: unknown) => {
          throw asStepFailed(err, at);
        });
      }
      outputs.push({ text: plan.reply ?? 'done', inReplyTo: [message.id] });
    }
    return outputs;
  },

  // Model loops load their SDK only when an agent uses them (issue 7).
  anthropic: async (turn, ctx) => (await import('./anthropic-provider.js')).runAnthropic(turn, ctx),
  openai: async (turn, ctx) => (await import('./openai-provider.js')).runOpenAI(turn, ctx),
  // Harnesses: the agents people run, unchanged (harness-provider.ts).
  'claude-code': async (turn, ctx) =>
    harness(turn, ctx, (await import('./claude-code-harness.js')).claudeCode),
  codex: async (turn, ctx) => harness(turn, ctx, (await import('./codex-harness.js')).codex),
  opencode: async (turn, ctx) => harness(turn, ctx, (await import('./opencode-harness.js')).opencode),
};

async function harness(
  turn: TurnAssignment,
  ctx: TurnContext,
  adapter: HarnessAdapter,
): Promise<TurnOutput[]> {
  return (await import('./harness-provider.js')).runHarnessTurn(adapter, turn, ctx);
}

/** A script step failed (or the plan could not be read): STEP_FAILED, with which step as data. */
export class StepFailed extends Error {
  readonly code: StepCode = 'STEP_FAILED';
  constructor(
    readonly step: FailedStep,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Whatever a step throws is that step's failure (a write on a full disk, a progress or a
 * state the gateway refused), so the turn says which step failed. Not so a sandbox limit the
 * step hit (its own code) or a gateway that revoked the sandbox (the runner exits).
 */
function asStepFailed(err: unknown, at: FailedStep): unknown {
  if (err instanceof StepFailed || err instanceof LimitExceeded || isRevoked(err)) return err;
  return new StepFailed(at, `step ${at.index} (${at.kind}) failed: ${(err as Error).message}`);
}

function parsePlan(messageId: number, text: string): ScriptPlan {
  const unreadable = (why: string) => new StepFailed({ messageId, index: null, kind: null }, why);
  let plan: unknown;
  try {
    plan = JSON.parse(text);
  } catch {
    throw unreadable('script plan is not valid JSON');
  }
  if (!plan || typeof plan !== 'object' || !Array.isArray((plan as ScriptPlan).steps)) {
    throw unreadable('script plan needs a "steps" array');
  }
  return plan as ScriptPlan;
}

async function runStep(
  step: ScriptStep,
  at: FailedStep,
  turn: TurnAssignment,
  ctx: TurnContext,
): Promise<void> {
  const fail = (what: string, assertion?: FailedStep['assertion']) => {
    throw new StepFailed(assertion ? { ...at, assertion } : at, `step ${at.index} (${at.kind}) ${what}`);
  };
  const inWorkspace = (path: string) => {
    const full = resolve(ctx.workspace, path);
    if (!full.startsWith(ctx.workspace + sep)) fail('path escapes the workspace');
    return full;
  };
  if ('run' in step) {
    const r = await runShell(step.run, {
      cwd: ctx.workspace,
      maxOutputBytes: turn.limits.maxOutputBytes,
      attempt: turn.attempt,
    });
    if (r.exitCode !== 0) fail(`exited ${r.exitCode ?? r.signal}: ${r.stderr.slice(0, 500)}`);
  } else if ('sleep' in step) {
    await new Promise((done) => setTimeout(done, step.sleep));
  } else if ('write' in step || 'append' in step) {
    const { path, content } = 'write' in step ? step.write : step.append;
    const full = inWorkspace(path);
    await mkdir(dirname(full), { recursive: true });
    if ('write' in step) await writeFile(full, content);
    else await appendFile(full, content);
  } else if ('progress' in step) {
    await ctx.progress(step.progress);
  } else if ('putState' in step) {
    await ctx.putState(step.putState.key, step.putState.value);
  } else if ('assertFile' in step) {
    const { path, equals } = step.assertFile;
    const actual = await readFile(inWorkspace(path), 'utf8').catch(() => null);
    if (actual !== equals) {
      fail(
        `${path} is ${JSON.stringify(actual?.slice(0, 200))}, expected ${JSON.stringify(equals?.slice(0, 200))}`,
        { subject: path, found: cut(actual), expected: cut(equals) },
      );
    }
  } else if ('assertState' in step) {
    const { key, equals } = step.assertState;
    const actual = (await ctx.getState(key)) ?? null;
    if (!isDeepStrictEqual(actual, equals)) {
      const subject = `state ${key}`;
      fail(`${subject} is ${JSON.stringify(actual)}, expected ${JSON.stringify(equals)}`, {
        subject,
        found: cutJson(actual),
        expected: cutJson(equals),
      });
    }
  } else {
    fail('is not a known step');
  }
}

function cut(text: string | null): string | null {
  return text === null ? null : text.slice(0, ASSERTION_MAX_CHARS);
}

/** A state value as it is, or its JSON cut to size when it is larger. */
function cutJson(value: unknown): unknown {
  const json = JSON.stringify(value) ?? 'null';
  return json.length <= ASSERTION_MAX_CHARS ? value : json.slice(0, ASSERTION_MAX_CHARS);
}
