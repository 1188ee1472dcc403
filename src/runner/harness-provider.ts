/**
 * Providers `claude-code`, `codex` and `opencode`: the harness people run, unchanged, as
 * one job of the turn. What they share lives here; each adapter (claude-code-harness.ts,
 * codex-harness.ts, opencode-harness.ts) says how to start its harness, how to read its
 * JSON events and what its result is.
 *
 * Invariants:
 * - The harness's own state (transcripts, session ids, config) lives under
 *   /workspace/.berth/<harness>/, and HOME is /workspace/.berth/home: it is written in the
 *   turn's attempt layer and committed with the turn, so a killed turn's half transcript
 *   vanishes with its layer, the retry resumes from the last committed turn, and the next
 *   turn resumes the conversation in whatever sandbox serves it.
 * - The harness's model base URL is the runner's model endpoint (model-endpoint.ts); its
 *   "API key" is a placeholder. Its telemetry and update checks are off.
 * - The agent's instruction files and skills (configDir, mounted read-only) are composed
 *   into the harness's config dir before every run: the instructions file is the agent's
 *   instructions followed by configDir's file; each skill is a link into configDir.
 * Node built-ins only; ships into the sandbox.
 */
import { mkdir, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type {
  HarnessProvider,
  HarnessSettings,
  TurnAssignment,
  TurnMessage,
  TurnOutput,
} from '../core/protocol.js';
import { HarnessError, runHarness } from './harness-process.js';
import { modelEndpointUrl } from './model-endpoint.js';
import type { TurnContext } from './turn-context.js';

/** The harness states of a session, in its workspace (committed with each turn). */
export const HARNESS_STATE_DIR = '.berth';
/** Stands in for an API key the harness insists on; the model endpoint drops it. */
export const PLACEHOLDER_KEY = 'berth-no-key-in-the-sandbox';
const MAX_INSTRUCTIONS_BYTES = 256 * 1024;
const PROGRESS_CHARS = 2000;

/** What a retry resumed mid-turn tells its harness: the transcript holds the task already. */
export const CONTINUATION =
  'Your run of this task was interrupted and has been restarted. Your files are as they were at your last model call. Continue the task from where you left off.';

/**
 * What the harness reads on its standard input: the turn's prompt, or, for a retry resumed
 * mid-turn whose harness has a conversation to resume, the continuation (the prompt is in
 * that conversation already; handing it again would start the task over on top of it).
 */
export function promptToSend(input: HarnessInput, resumesConversation: boolean): string {
  return resumesConversation && input.resumedMidTurn ? CONTINUATION : input.prompt;
}

/** What an adapter is handed for one run. */
export interface HarnessInput {
  settings: HarnessSettings;
  /** The turn's messages as one prompt. */
  prompt: string;
  sessionId: string;
  workspace: string;
  /** /workspace/.berth/<harness>: the harness's own config and state dir. */
  stateDir: string;
  /** Base URL of the model endpoint for an API: modelEndpointUrl. */
  endpoint: (api: 'anthropic' | 'openai') => string;
  /**
   * The retry of a turn resumed from a checkpoint at one of its model calls: the workspace,
   * the harness's state dir included, is as of that call, the turn's prompt already in it.
   */
  resumedMidTurn: boolean;
}

/** One run's start and reading: the argv, env and standard input, then each event, then the result. */
export interface HarnessSession {
  argv: string[];
  env: Record<string, string>;
  /** The prompt, read by the harness from its standard input. */
  stdin: string;
  /** Progress texts an event stands for (none for most). */
  onEvent(event: Record<string, unknown>): Promise<string[]>;
  /** The reply, once the harness exited 0; throws HarnessError when its result is an error. */
  finish(): TurnOutput;
}

export interface HarnessAdapter {
  name: HarnessProvider;
  /** The file the harness reads its instructions from, as named in configDir (CLAUDE.md, AGENTS.md). */
  instructionsFile: string;
  /** Where in stateDir the composed instructions and skills go (relative to stateDir). */
  instructionsTarget: string;
  skillsTarget: string;
  begin(input: HarnessInput): Promise<HarnessSession>;
}

export async function runHarnessTurn(
  adapter: HarnessAdapter,
  turn: TurnAssignment,
  ctx: TurnContext,
): Promise<TurnOutput[]> {
  const settings = turn.harness;
  if (!settings)
    throw new HarnessError(
      'HARNESS_FAILED',
      `turn ${turn.turnId} of a ${turn.provider} agent has no settings`,
    );
  const stateDir = join(ctx.workspace, HARNESS_STATE_DIR, adapter.name);
  const home = join(ctx.workspace, HARNESS_STATE_DIR, 'home');
  await mkdir(stateDir, { recursive: true });
  await mkdir(home, { recursive: true });
  await composeInstructions(settings, adapter, stateDir);
  await linkSkills(settings, join(stateDir, adapter.skillsTarget));
  const session = await adapter.begin({
    settings,
    prompt: promptOf(turn.messages),
    sessionId: turn.sessionId,
    workspace: ctx.workspace,
    stateDir,
    endpoint: modelEndpointUrl,
    resumedMidTurn: turn.checkpoint !== undefined,
  });
  const run = runHarness(adapter.name, {
    argv: session.argv,
    stdin: session.stdin,
    env: {
      ...(process.env as Record<string, string>),
      HOME: home,
      PATH: '/usr/local/bin:/usr/bin:/bin',
      LANG: 'C.UTF-8',
      TMPDIR: '/tmp',
      BERTH_RUNNER_PID: String(process.pid),
      BERTH_ATTEMPT: String(turn.attempt),
      ...session.env,
    },
    cwd: ctx.workspace,
    timeoutMs: settings.timeoutMs,
    onEvent: async (event) => {
      for (const text of await session.onEvent(event)) await postProgress(ctx, text);
    },
  });
  await run.catch((err: unknown) => {
    // A harness that exits non-zero often says why in its result event, not on stderr.
    if (err instanceof HarnessError && err.code === 'HARNESS_FAILED') {
      const said = resultError(session);
      if (said) throw new HarnessError('HARNESS_FAILED', `${said} (${err.message})`);
    }
    throw err;
  });
  return [session.finish()];
}

/** The error the harness's own result reports, if any. */
function resultError(session: HarnessSession): string | null {
  try {
    session.finish();
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

function promptOf(messages: TurnMessage[]): string {
  return messages.map((m) => m.text).join('\n\n');
}

async function postProgress(ctx: TurnContext, text: string): Promise<void> {
  const trimmed = text.trim();
  if (!trimmed) return;
  await ctx.progress(trimmed.length > PROGRESS_CHARS ? `${trimmed.slice(0, PROGRESS_CHARS)}…` : trimmed);
}

/** The agent's instructions, then configDir's instruction file; no file when both are empty. */
async function composeInstructions(
  settings: HarnessSettings,
  adapter: HarnessAdapter,
  stateDir: string,
): Promise<void> {
  const fromConfig = settings.configDir
    ? await readFile(join(settings.configDir, adapter.instructionsFile), 'utf8').catch(() => '')
    : '';
  const text = [settings.instructions.trim(), fromConfig.slice(0, MAX_INSTRUCTIONS_BYTES).trim()]
    .filter(Boolean)
    .join('\n\n');
  const target = join(stateDir, adapter.instructionsTarget);
  if (!text) return void (await rm(target, { force: true }));
  await mkdir(join(target, '..'), { recursive: true });
  await writeFile(target, `${text}\n`);
}

/**
 * One link per skill folder of configDir/skills in the harness's skills dir; links of
 * skills no longer there are removed, the harness's own skills are left alone.
 */
async function linkSkills(settings: HarnessSettings, skillsDir: string): Promise<void> {
  const source = settings.configDir ? join(settings.configDir, 'skills') : null;
  const wanted = source ? await readdir(source).catch(() => [] as string[]) : [];
  await mkdir(skillsDir, { recursive: true });
  for (const name of await readdir(skillsDir)) {
    const link = await readlink(join(skillsDir, name)).catch(() => null);
    if (link?.startsWith('/data/') && !wanted.includes(name))
      await rm(join(skillsDir, name), { force: true });
  }
  for (const name of wanted) {
    const at = join(skillsDir, name);
    await rm(at, { recursive: true, force: true });
    await symlink(join(source!, name), at);
  }
}

/** The reply of a run whose events reported no failure; HARNESS_FAILED with what they said otherwise. */
export function replyOrFailure(
  name: HarnessProvider,
  failure: string | null,
  reply: string,
  data: Record<string, unknown>,
): TurnOutput {
  if (failure) throw new HarnessError('HARNESS_FAILED', `${name}: ${failure.slice(0, 4000)}`);
  return { text: reply, data: { provider: name, ...data } };
}

/**
 * The id a harness gave its conversation (Codex's thread, opencode's session), as the last
 * committed turn saved it in the harness's dir; '' before the first committed turn.
 */
export async function savedConversationId(stateDir: string, file: string): Promise<string> {
  return (await readFile(join(stateDir, file), 'utf8').catch(() => '')).trim();
}

/** Saves it in the turn's layer: committed with the turn, gone if the turn is killed. */
export async function saveConversationId(stateDir: string, file: string, id: string): Promise<void> {
  await writeFile(join(stateDir, file), `${id}\n`);
}

/** Text of a value a harness reports, for errors and replies. */
export function textOf(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined ? '' : JSON.stringify(value);
}
