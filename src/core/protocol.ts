/**
 * The wire protocol between the gateway (host) and the runner (inside the sandbox).
 * Types and constants only, with no imports: the runner ships into the sandbox with
 * nothing but this file from core.
 */

/** Where the gateway socket and the sandbox token appear inside the sandbox. */
export const SANDBOX_RUN_DIR = '/run/berth';
/** Where each turn's workspace (committed state + the turn's own writes) appears inside the sandbox. */
export const SANDBOX_WORKSPACE = '/workspace';
export const GATEWAY_SOCKET_NAME = 'gateway.sock';
/** The boot token: lets the runner ask for its binding (GET /v1/bind), nothing else. */
export const TOKEN_FILE_NAME = 'token';
/** The runner's HTTP proxy inside the sandbox (127.0.0.1), the egress door to the gateway. */
export const EGRESS_PROXY_PORT = 3128;

/**
 * The runner's model endpoint inside the sandbox (127.0.0.1): a harness's base URL points at
 * `http://127.0.0.1:<port>/<api>`, and the runner forwards each call to the gateway's model
 * proxy with the session token. The harness holds no key and no token.
 */
export const MODEL_ENDPOINT_PORT = 3129;

/** The answer to GET /v1/bind: who this sandbox now serves. Sent once, when bound. */
export interface BindAssignment {
  sessionId: string;
  generation: number;
  /** The session token every later request carries. */
  token: string;
  heartbeatIntervalMs: number;
  /**
   * The per-install egress CA certificate (PEM, public part), when the agent has egress
   * header rules: the gateway terminates TLS to those targets, so the runner adds it to
   * the trust bundle of every tool it starts.
   */
  egressCaPem?: string;
  /**
   * A resident agent's sandbox: processes outlive turns, and each heartbeat reports the
   * sandbox's usage (SandboxUsage) for the recycle policy.
   */
  resident?: true;
}

/** All processes of a sandbox, as its runner counts them (POST /v1/heartbeat, resident sandboxes). */
export interface SandboxUsage {
  rssBytes: number;
  openFiles: number;
}

export interface TurnMessage {
  id: number;
  text: string;
}

export interface TurnAssignment {
  turnId: string;
  sessionId: string;
  generation: number;
  attempt: number;
  provider: 'command' | 'script' | 'anthropic' | 'openai' | HarnessProvider;
  messages: TurnMessage[];
  limits: { maxOutputBytes: number; heartbeatIntervalMs: number };
  /** For anthropic and openai turns: the loop's settings (the key stays on the host). */
  model?: ModelSettings;
  /** For harness turns (claude-code, codex, opencode). */
  harness?: HarnessSettings;
  /**
   * A retry that resumes from a checkpoint: the workspace already holds its files, and a
   * `command` job sees it as BERTH_CHECKPOINT (checkpointEnvOf). Absent: the turn starts
   * from the committed tree.
   */
  checkpoint?: ResumedCheckpoint;
}

/** The checkpoint a turn resumed from: how many checkpoints its files hold, and the newest one's label. */
export interface ResumedCheckpoint {
  count: number;
  label: string;
}

/** POST <CHECKPOINT_PATH> {label?}: answered once the checkpoint is durable (uploaded and recorded). */
export const CHECKPOINT_PATH = '/v1/checkpoint';
/** The environment variable a job resumed from a checkpoint sees. */
export const CHECKPOINT_ENV = 'BERTH_CHECKPOINT';
/** A label is printable text (a colon too: the count comes first in BERTH_CHECKPOINT), at most this long. */
export const CHECKPOINT_LABEL_MAX_CHARS = 200;

/** The answer to POST /v1/checkpoint. */
export interface CheckpointTaken {
  /** Its number in the work on these messages, across tries. */
  seq: number;
  /** How many checkpoints a retry resuming from it holds: what BERTH_CHECKPOINT would say. */
  count: number;
  label: string;
  /** Bytes of its object (0: nothing changed since the previous one). */
  bytes: number;
  /** Request to durable, on the host. */
  ms: number;
}

/** `<count>:<label>`: the count first, so a label may hold any character, a colon too. */
export function checkpointEnvOf(resumed: ResumedCheckpoint): string {
  return `${resumed.count}:${resumed.label}`;
}

export type HarnessProvider = 'claude-code' | 'codex' | 'opencode';

export interface HarnessSettings {
  model: string;
  /** One run of the harness is killed past this (HARNESS_TIMEOUT). */
  timeoutMs: number;
  /** The agent's instructions, composed into the harness's instruction file. */
  instructions: string;
  /** The agent's configDir as mounted in the sandbox (read-only), when it has one. */
  configDir?: string;
}

export interface ModelSettings {
  model: string;
  maxTokens: number;
  maxSteps: number;
  toolTimeoutMs: number;
  /** The agent's instructions; the runner appends the workspace's AGENT.md. */
  instructions: string;
}

/** Path prefix of the gateway's model proxy: <prefix>/anthropic/… and <prefix>/openai/… */
export const MODEL_PROXY_PATH = '/v1/model';

/**
 * The gateway's mediated storage: GET <path>?prefix=&after=&limit= lists,
 * GET/HEAD/PUT/DELETE <path>/object/<key> reads, stats, writes and deletes one object.
 * Content hashes travel in STORAGE_SHA256_HEADER (a PUT may send the expected one).
 */
export const STORAGE_PATH = '/v1/storage';
export const STORAGE_SHA256_HEADER = 'x-berth-sha256';
export const STORAGE_UPDATED_AT_HEADER = 'x-berth-updated-at';

/** One entry of a storage listing, and the answer of a put. */
export interface StorageEntry {
  key: string;
  sha256: string;
  size: number;
  updatedAt: number;
}

/** A page of a listing; `next` is the cursor (`after`) of the next page, null on the last. */
export interface StorageListing {
  objects: StorageEntry[];
  next: string | null;
}

export interface TurnOutput {
  text: string;
  data?: unknown;
  /**
   * The messages of the turn this output answers. A per-message provider (`command`,
   * `script`) names the one message each output belongs to; absent = every message of the
   * turn (a model or harness answers all its pending messages at once).
   */
  inReplyTo?: number[];
}

/** What a reply answers: its own message (`message`), or every message of its turn (`turn`). */
export type ReplyScope = 'message' | 'turn';

export interface CommitRequest {
  turnId: string;
  outputs: TurnOutput[];
}

/**
 * Sandbox limits the runner reports when a turn hits one; each is a catalogue code
 * (errors.ts) and ends the turn for good: running it again would hit the limit again.
 */
export const LIMIT_CODES = [
  'SANDBOX_PIDS_LIMIT',
  'SANDBOX_OUT_OF_MEMORY',
  'SANDBOX_TMP_FULL',
  'OUTPUT_LIMIT_EXCEEDED',
] as const;
export type LimitCode = (typeof LIMIT_CODES)[number];

/** Harness failures the runner reports: catalogue codes (errors.ts) the retry policy applies to. */
export const HARNESS_CODES = ['HARNESS_FAILED', 'HARNESS_TIMEOUT'] as const;
export type HarnessCode = (typeof HARNESS_CODES)[number];

/** A script step failed: a catalogue code (errors.ts) the retry policy applies to. */
export const STEP_CODES = ['STEP_FAILED'] as const;
export type StepCode = (typeof STEP_CODES)[number];

/** The codes a runner may abort its turn with (without one, the gateway records TURN_FAILED). */
export const RUNNER_ABORT_CODES = [...LIMIT_CODES, ...HARNESS_CODES, ...STEP_CODES] as const;
export type RunnerAbortCode = (typeof RUNNER_ABORT_CODES)[number];

export interface AbortRequest {
  turnId: string;
  error: string;
  /**
   * A sandbox limit: the messages fail at once instead of being retried. A harness or step
   * code: the turn is retried like any other failure, its code kept in the error.
   */
  code?: RunnerAbortCode;
}

/** Which step of a script plan failed: what a checker reads instead of the error's text. */
export interface FailedStep {
  /** The message of the turn whose plan it is. */
  messageId: number;
  /** 0-based index into the plan's steps; null when the plan itself could not be read. */
  index: number | null;
  /** The step's kind (its key: run, assertFile, ...); null with index null. */
  kind: string | null;
  /**
   * A failed assertFile or assertState: what it looked at (the file's path, or `state <key>`),
   * what it found (null: absent) and what it expected, whole up to ASSERTION_MAX_CHARS each.
   */
  assertion?: { subject: string; found?: unknown; expected?: unknown };
}

/** How much of a failed assertion's found and expected values a FailedStep carries (strings are cut there). */
export const ASSERTION_MAX_CHARS = 16 * 1024;

export interface ProgressRequest {
  turnId: string;
  text: string;
  /**
   * Set when a script step failed: reported before the runner cleans up and aborts, so the
   * failure is in the store even when the sandbox dies before its abort arrives.
   */
  failedStep?: FailedStep;
}

export interface HeartbeatRequest {
  turnId?: string;
}

/** A command job's result: its stdout is the output's `text`, the rest is its `data`. */
export interface CommandResult {
  exitCode: number | null;
  signal: string | null;
  stderr: string;
  /** The job ran past its time limit and its process group was killed. */
  timedOut?: boolean;
  /**
   * Set when the job's main process exited leaving processes running (`sleep 99 &`,
   * `npm run dev &`): the job ended without them, and this says what becomes of them.
   */
  leftRunning?: LeftRunning;
}

/** A process a job started that was still running when the job ended. */
export interface LeftProcess {
  pid: number;
  /** Its command line, cut. */
  command: string;
}

/**
 * What becomes of the processes a job left running: killed when the turn ends, like every
 * process a turn started, or kept by a resident agent's sandbox (docs/resident.md).
 */
export type LeftRunningFate = 'killed-at-turn-end' | 'kept-resident';

export interface LeftRunning {
  processes: LeftProcess[];
  fate: LeftRunningFate;
}

/** A script plan: the body of a message to a `script` agent. */
export type ScriptStep =
  | { run: string }
  | { sleep: number }
  | { write: { path: string; content: string } }
  | { append: { path: string; content: string } }
  | { progress: string }
  | { putState: { key: string; value: unknown } }
  /** Fails the turn unless the file's content equals `equals` (null: the file must not exist). */
  | { assertFile: { path: string; equals: string | null } }
  /** Fails the turn unless the state value deep-equals `equals` (null: the key must not be set). */
  | { assertState: { key: string; equals: unknown } };

export interface ScriptPlan {
  steps: ScriptStep[];
  reply?: string;
}

/**
 * What the runner's exec long-poll (GET /v1/exec) hands it: a command to start, or the
 * cancel of one it runs (its client went away: its process group is killed).
 */
export type ExecOffer =
  | {
      kind: 'start';
      execId: string;
      command: string;
      /** Relative to the workspace. */
      cwd?: string;
      env?: Record<string, string>;
      timeoutMs: number;
      maxOutputBytes: number;
    }
  | { kind: 'cancel'; execId: string };

/** POST /v1/exec/output: a piece of the command's output, in order. */
export interface ExecOutput {
  execId: string;
  stream: 'stdout' | 'stderr';
  data: string;
}

/** POST /v1/exec/exit: how the command ended (after all its output), or why it could not run. */
export interface ExecExit {
  execId: string;
  exitCode: number | null;
  signal?: string;
  timedOut?: boolean;
  /** The command failed as a job (its output passed the limit): a catalogue code. */
  error?: { code: 'OUTPUT_LIMIT_EXCEEDED' | 'EXEC_FAILED'; message: string };
}

/** The progress text of a tool call, as the runner's model loop reports it and a turn's timeline reads it back. */
export function toolProgressText(name: string, phase: 'started' | 'finished', isError = false): string {
  return `tool ${name} ${phase}${isError ? ' with an error' : ''}`;
}

/** toolProgressText's lines: the tool, the phase, and whether it failed. */
export const TOOL_PROGRESS = /^tool (\S+) (started|finished)( with an error)?$/;
