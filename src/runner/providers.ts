/**
 * Providers turn a turn's messages into outputs. `command`: each message is a shell
 * job; its reply is the exit code and output. `script`: each message is a JSON plan of
 * steps (run, sleep, write, progress), for tests, demos, load and chaos; a failing step
 * fails the turn.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, resolve, sep } from 'node:path';
import type { ScriptPlan, ScriptStep, TurnAssignment, TurnOutput } from '../core/protocol.js';
import { runShell } from './processes.js';

export interface TurnContext {
  workspace: string;
  progress(text: string): Promise<void>;
}

export type Provider = (turn: TurnAssignment, ctx: TurnContext) => Promise<TurnOutput[]>;

export const PROVIDERS: Record<TurnAssignment['provider'], Provider> = {
  async command(turn, ctx) {
    const outputs: TurnOutput[] = [];
    for (const message of turn.messages) {
      const { stdout, ...result } = await runShell(message.text, {
        cwd: ctx.workspace,
        maxOutputBytes: turn.limits.maxOutputBytes,
      });
      outputs.push({ text: stdout, data: result });
    }
    return outputs;
  },

  async script(turn, ctx) {
    const outputs: TurnOutput[] = [];
    for (const message of turn.messages) {
      const plan = parsePlan(message.text);
      for (const [index, step] of plan.steps.entries()) await runStep(step, index, turn, ctx);
      outputs.push({ text: plan.reply ?? 'done' });
    }
    return outputs;
  },
};

export class StepFailed extends Error {}

function parsePlan(text: string): ScriptPlan {
  let plan: unknown;
  try {
    plan = JSON.parse(text);
  } catch {
    throw new StepFailed('script plan is not valid JSON');
  }
  if (!plan || typeof plan !== 'object' || !Array.isArray((plan as ScriptPlan).steps)) {
    throw new StepFailed('script plan needs a "steps" array');
  }
  return plan as ScriptPlan;
}

async function runStep(
  step: ScriptStep,
  index: number,
  turn: TurnAssignment,
  ctx: TurnContext,
): Promise<void> {
  if ('run' in step) {
    const r = await runShell(step.run, { cwd: ctx.workspace, maxOutputBytes: turn.limits.maxOutputBytes });
    if (r.exitCode !== 0) {
      throw new StepFailed(`step ${index} (run) exited ${r.exitCode ?? r.signal}: ${r.stderr.slice(0, 500)}`);
    }
  } else if ('sleep' in step) {
    await new Promise((done) => setTimeout(done, step.sleep));
  } else if ('write' in step) {
    const path = resolve(ctx.workspace, step.write.path);
    if (!path.startsWith(ctx.workspace + sep))
      throw new StepFailed(`step ${index} (write) path escapes the workspace`);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, step.write.content);
  } else if ('progress' in step) {
    await ctx.progress(step.progress);
  } else {
    throw new StepFailed(`step ${index} is not one of run, sleep, write, progress`);
  }
}
