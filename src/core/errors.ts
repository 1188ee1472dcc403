/**
 * The one error catalogue. Every error berth raises on purpose is a BerthError with a
 * stable `code`, an HTTP status, a message naming the entity/state/operation and a hint
 * saying what to do. `docs/errors.md` is kept in sync by errors.test.ts.
 * Retryable errors are transient (a later try may succeed); terminal ones are not.
 */

export interface ErrorSpec {
  status: number;
  retryable: boolean;
  hint: string;
  /** A turn aborted with this code spends one of its messages' tries. @default true */
  costsTry?: boolean;
  /**
   * A turn aborted with this code holds its session: its messages go back to pending with
   * their try given back, and the session leaves the claim queue until an operator acts.
   * For a condition no retry can cure by itself, where failing the messages would lose them.
   * @default false
   */
  holdsSession?: boolean;
  /**
   * A turn aborted with this code lost its sandbox, not its work (killed, crashed): its
   * first retry is due at once, on another sandbox, and backoff starts from the second.
   * @default false
   */
  lostSandbox?: boolean;
  /**
   * A turn aborted with this code was stopped by its user: the turn and its messages end
   * `interrupted`, never retried. @default false
   */
  interrupts?: boolean;
}

export const ERRORS = {
  INVALID_INPUT: {
    status: 400,
    retryable: false,
    hint: 'Fix the request body as the message says and send it again.',
  },
  INVALID_SESSION_ID: {
    status: 400,
    retryable: false,
    hint: 'Use 1-64 characters from A-Z a-z 0-9 _ - . , starting with a letter or digit.',
  },
  MESSAGE_TOO_LARGE: {
    status: 413,
    retryable: false,
    hint: 'Send a shorter message, or raise BERTH_MAX_MESSAGE_BYTES on the host.',
  },
  AGENT_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'Create it first: berth agent create <name> --provider command',
  },
  AGENT_EXISTS: {
    status: 409,
    retryable: false,
    hint: 'Pick another name, or delete the existing agent first.',
  },
  SESSION_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'Send a message to create it: berth send <session> <text> --agent <agent>',
  },
  SESSION_EXISTS: {
    status: 409,
    retryable: false,
    hint: 'Pick another session id, or post messages to the existing session.',
  },
  SESSION_ARCHIVED: {
    status: 409,
    retryable: false,
    hint: 'An archived session takes no more messages; start a new session id.',
  },
  AGENT_IN_USE: {
    status: 409,
    retryable: false,
    hint: 'Delete (archive) the sessions of this agent first: DELETE /v1/sessions/<id>.',
  },
  SESSION_AGENT_MISMATCH: {
    status: 409,
    retryable: false,
    hint: 'A session belongs to one agent for its whole life; use a new session id for another agent.',
  },
  AGENT_REQUIRED: {
    status: 400,
    retryable: false,
    hint: 'Name the agent for a new session: --agent <name> (or "agent" in the body).',
  },
  STALE_GENERATION: {
    status: 409,
    retryable: false,
    hint: 'This sandbox was replaced; it must stop. Nothing it sent was written.',
  },
  TURN_INTERRUPTED: {
    status: 409,
    retryable: false,
    interrupts: true,
    hint: 'The turn was interrupted (POST /v1/sessions/<id>/interrupt): its workspace changes were discarded and its messages are not retried. Send the message again to redo it.',
  },
  NO_RUNNING_TURN: {
    status: 409,
    retryable: false,
    hint: 'Only a running turn can be interrupted; this one committed or ended, or none started. See the session: GET /v1/sessions/<id>.',
  },
  MESSAGE_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: "List the session's messages: GET /v1/sessions/<id>/messages.",
  },
  MESSAGE_CANCELLED: {
    status: 409,
    retryable: false,
    hint: 'The message was taken back (DELETE /v1/sessions/<id>/messages/<mid>) before a turn took it; it was never run. Send it again if it is wanted after all.',
  },
  MESSAGE_NOT_PENDING: {
    status: 409,
    retryable: false,
    hint: 'Only a queued message (status pending) can be cancelled; a running one is stopped with berth interrupt <session>.',
  },
  TURN_ENDED: {
    status: 409,
    retryable: false,
    hint: 'The turn was already committed or aborted (or is not this sandbox’s); nothing was written.',
  },
  STATE_TOO_LARGE: {
    status: 413,
    retryable: false,
    hint: 'Keep session state small; put bulk data in workspace files.',
  },
  UNAUTHORIZED: {
    status: 401,
    retryable: false,
    hint: 'Send the sandbox token in the Authorization header.',
  },
  API_TOKEN_INVALID: {
    status: 401,
    retryable: false,
    hint: 'Send "Authorization: Bearer <token>": a tenant token from `berth token create --tenant T`, or the admin token in <data>/admin-token (the CLI reads it itself, or set BERTH_TOKEN).',
  },
  ADMIN_ONLY: {
    status: 403,
    retryable: false,
    hint: 'Use the operator admin token (<data>/admin-token) for this.',
  },
  WEBHOOK_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: "List webhooks with GET /v1/webhooks, and a webhook's deliveries with GET /v1/webhooks/<id>/deliveries.",
  },
  TOKEN_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List tokens with berth token list.',
  },
  WORKER_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List the workers with berth status (or GET /v1/workers); a worker that stopped has no row.',
  },
  TURN_NOT_FOUND: { status: 404, retryable: false, hint: 'Poll GET /v1/turn for the current turn.' },
  SESSION_TURN_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: "List the session's turns and versions: berth session history <session> (GET /v1/sessions/<id>/turns).",
  },
  TURN_NOT_COMMITTED: {
    status: 409,
    retryable: false,
    hint: 'Only a committed turn changed the workspace; an aborted one left nothing, and a running one has not committed yet. berth session history <session> shows which turns committed.',
  },
  VERSION_NOT_RETAINED: {
    status: 410,
    retryable: false,
    hint: 'Ask for one of the versions the message names as available (berth session history <session>); older ones were compacted into a snapshot and their layers collected.',
  },
  SESSION_BUSY: {
    status: 409,
    retryable: true,
    hint: 'Wait until the session has answered its messages (berth session history <session>), or take them back (berth interrupt <session>; DELETE /v1/sessions/<id>/messages/<n> for a queued one), then ask again.',
  },
  WORKSPACE_PATH_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List the directory first: berth session files <session> [dir] --version <n> (GET /v1/sessions/<id>/files?version=<n>&path=<dir>).',
  },
  DOCKER_UNREACHABLE: {
    status: 503,
    retryable: true,
    hint: 'Start the engine (as root on Debian: scripts/ensure-docker.sh, or apt-get install docker.io && dockerd &), or set BERTH_DOCKER_SOCKET.',
  },
  KUBERNETES_UNREACHABLE: {
    status: 503,
    retryable: true,
    hint: 'Check BERTH_KUBECONFIG (or $KUBECONFIG), that BERTH_KUBE_NAMESPACE exists (kubectl create namespace berth) and that BERTH_KUBE_NODE_SELECTOR matches a Ready node of this machine (docs/kubernetes.md).',
  },
  IMAGE_MISSING: {
    status: 503,
    retryable: true,
    hint: 'Build the base image (berth image build), or load the image named by BERTH_IMAGE / the agent into the engine.',
  },
  SANDBOX_FAILED: {
    status: 500,
    retryable: true,
    hint: 'The turn is retried with backoff; see the turn error for the cause.',
  },
  TURN_FAILED: {
    status: 500,
    retryable: true,
    hint: 'The agent in the sandbox failed the turn (the error says how); it is retried with backoff in a fresh sandbox.',
  },
  STEP_FAILED: {
    status: 500,
    retryable: true,
    hint: "A step of the script plan failed: an assertion found other content than it expected, or a command exited non-zero. The error names the step; the turn's progress event holds it as data (failedStep). The turn is retried with backoff in a fresh sandbox.",
  },
  SANDBOX_EXITED: {
    status: 503,
    retryable: true,
    lostSandbox: true,
    hint: 'The sandbox died mid-turn (killed or crashed); the turn is retried at once in a fresh one, and with backoff if that one dies too.',
  },
  SANDBOX_UNRESPONSIVE: {
    status: 503,
    retryable: true,
    hint: 'The sandbox stopped heartbeating (frozen, or starved of CPU); it was killed and the turn is retried. Raise BERTH_HEARTBEAT_TIMEOUT on an overloaded host.',
  },
  TURN_TIMEOUT: {
    status: 504,
    retryable: true,
    hint: 'The turn ran past BERTH_TURN_TIMEOUT; its sandbox was killed and the turn is retried. Raise the timeout for long jobs.',
  },
  LEASE_EXPIRED: {
    status: 503,
    retryable: true,
    hint: 'The worker running the turn stopped renewing its lease (it died or was cut off); another worker took the session over and retries the turn.',
  },
  WORKER_FENCED: {
    status: 503,
    retryable: true,
    hint: 'The worker could not renew its lease in time and killed its own sandboxes before anyone else could take them over; the turn is retried.',
  },
  WORKER_STOPPING: {
    status: 503,
    retryable: true,
    costsTry: false,
    hint: 'The worker was stopped (a deploy, a restart); the turn is retried at once without spending a try.',
  },
  WORKSPACE_UNAVAILABLE: {
    status: 503,
    retryable: false,
    hint: 'berth needs overlayfs and mount rights (root) for transactional workspaces; run the worker as root on a kernel with overlay.',
  },
  WORKSPACE_BEHIND: {
    status: 409,
    retryable: true,
    hint: 'The turn ran on a copy of the workspace older than the store says it is (a machine that missed a commit); nothing was committed, and the retry materialises the current one.',
  },
  RESIDENT_WORKSPACE_LOST: {
    status: 409,
    retryable: false,
    holdsSession: true,
    hint: 'The resident workspace lives only on the data dir named in the message, and this worker does not hold it (a commit came after the last capture in its chain, so the chain would give older files); nothing ran and the messages are kept, the session held. Bring that data dir back with a worker on it (then berth session resume ID), or accept the loss: berth session reset-workspace ID (the session goes on with an empty workspace).',
  },
  NO_LIVE_SANDBOX: {
    status: 409,
    retryable: false,
    hint: "A command runs only in a sandbox bound to the session now: a resident agent's session keeps its sandbox between turns (docs/resident.md); an ephemeral session has one only while a turn runs. Send the session a message first, or use a resident agent.",
  },
  SANDBOX_UNREACHABLE: {
    status: 503,
    retryable: true,
    hint: "The worker holding the session's sandbox did not answer, or its row is stale; retry shortly (a session taken over by another worker answers there).",
  },
  SANDBOX_RESTARTED: {
    status: 503,
    retryable: false,
    hint: 'The sandbox (or its worker) ended while the command ran; `reason` says why. The command ran in part: run it again only if it is safe to repeat.',
  },
  EXEC_FAILED: {
    status: 500,
    retryable: false,
    hint: 'The runner could not start the command in the sandbox (the message says why).',
  },
  FILE_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: "No file or directory at that path of the session's live sandbox workspace; list its directory first (berth files ls SESSION DIR, GET /v1/sessions/<id>/sandbox/files?path=<dir>).",
  },
  PATH_OUTSIDE_WORKSPACE: {
    status: 400,
    retryable: false,
    hint: 'Name a path inside the workspace: relative to it (data/in.csv) or absolute under /workspace (/workspace/data/in.csv), with no ".." leaving it, valid UTF-8, and no symlink that resolves outside it.',
  },
  FILE_CONFLICT: {
    status: 409,
    retryable: false,
    hint: 'The path holds something the operation cannot replace (a directory where a file goes, a non-empty directory removed without recursive=true, an existing name for mkdir); change the path or remove what is there first.',
  },
  SESSION_NOT_HELD: {
    status: 409,
    retryable: false,
    hint: 'Only a held session (status held, e.g. its resident workspace was lost) can be resumed or have its workspace reset; see GET /v1/sessions/<id>.',
  },
  WORKSPACE_FAILED: {
    status: 507,
    retryable: true,
    hint: 'The turn was aborted and will be retried; free disk space under the data dir if this repeats.',
  },
  DISK_FULL: {
    status: 507,
    retryable: true,
    hint: "The worker's data dir ran out of space during the turn; nothing was committed, and the turn is retried (on any worker). Lower --cache-bytes (BERTH_CACHE_BYTES) below what the disk holds, or give the data dir more space.",
  },
  SANDBOX_PIDS_LIMIT: {
    status: 422,
    retryable: false,
    hint: 'A job forked until the sandbox process limit stopped it (a fork bomb, or runaway parallelism); the turn is not retried. Raise the agent pidsLimit if the work needs more processes.',
  },
  SANDBOX_OUT_OF_MEMORY: {
    status: 422,
    retryable: false,
    hint: 'A process of the turn was killed at the sandbox memory limit; the turn is not retried. Use less memory, or raise the agent memoryMb.',
  },
  SANDBOX_TMP_FULL: {
    status: 507,
    retryable: false,
    hint: '/tmp and /dev/shm are small tmpfs mounts (64 MiB each, counted against the sandbox memory); write bulk data under /workspace.',
  },
  WORKSPACE_QUOTA_EXCEEDED: {
    status: 507,
    retryable: false,
    hint: 'The session workspace would pass the agent workspaceMb quota; the turn is not committed and not retried. Delete files, or raise workspaceMb.',
  },
  OUTPUT_LIMIT_EXCEEDED: {
    status: 413,
    retryable: false,
    hint: 'A job wrote more than BERTH_MAX_OUTPUT_BYTES to stdout/stderr and was killed; redirect bulk output to a file under /workspace, or raise BERTH_MAX_OUTPUT_BYTES.',
  },
  ISOLATION_UNAVAILABLE: {
    status: 503,
    retryable: false,
    hint: 'The agent asks for an isolation tier this runtime does not offer. Docker: for runsc (gVisor) run scripts/ensure-runsc.sh as root. Kubernetes: create the RuntimeClass named by BERTH_KUBE_RUNTIME_CLASS_RUNSC (docs/kubernetes.md). Or create the agent with isolation runc.',
  },
  EGRESS_DENIED: {
    status: 403,
    retryable: false,
    hint: 'The sandbox may reach only the host:port entries of its agent egress allowlist; add the target to the agent (egress) if it should be reachable.',
  },
  EGRESS_FAILED: {
    status: 502,
    retryable: true,
    hint: 'The target is allowed but the host could not connect to it; check that it is up and resolvable from the worker.',
  },
  EGRESS_SECRET_UNAVAILABLE: {
    status: 502,
    retryable: false,
    hint: 'A header rule of the agent egress names a secret the host cannot read; the request was not sent. Set it with berth secret set NAME (and check BERTH_SECRET_KEY).',
  },
  MOUNT_NOT_ALLOWED: {
    status: 400,
    retryable: false,
    hint: 'Extra mounts must be existing directories under a root of the mount allowlist (BERTH_MOUNT_ALLOWLIST, default ~/.config/berth/mount-allowlist.json) and match no blocked pattern; see docs/security.md.',
  },
  STORE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    hint: 'Check that PostgreSQL runs and that BERTH_STORE (or --store) names it: host, port, database, user and password. Nothing was written.',
  },
  CONFIG_INVALID: {
    status: 500,
    retryable: false,
    hint: 'Fix the named environment variable or flag; see docs/config.md.',
  },
  HOST_UNREACHABLE: {
    status: 503,
    retryable: true,
    hint: 'Start the host: berth up (or set BERTH_URL to where it runs).',
  },
  REPLY_WAIT_TIMEOUT: {
    status: 504,
    retryable: true,
    hint: 'The message is still queued or running (waiting stopped, the message was not cancelled): read its reply later with berth logs <session>, or wait longer (send_message timeoutMs).',
  },
  SECRET_STORE_LOCKED: {
    status: 500,
    retryable: false,
    hint: 'Set BERTH_SECRET_KEY to the key the secrets were stored with (the same for every berth process on this data dir).',
  },
  MODEL_KEY_MISSING: {
    status: 503,
    retryable: true,
    hint: "Store the provider key on the host: berth secret set anthropic (or openai, or the agent's secret name); the value is read from stdin.",
  },
  MODEL_BUDGET_EXCEEDED: {
    status: 429,
    retryable: true,
    hint: "The agent spent its hourly model budget; wait for the window to move on, or raise the agent's budget.",
  },
  MODEL_UPSTREAM_FAILED: {
    status: 502,
    retryable: true,
    hint: "The model provider could not be reached; check ANTHROPIC_BASE_URL / OPENAI_BASE_URL (or the agent's baseUrl) on the host.",
  },
  HARNESS_FAILED: {
    status: 502,
    retryable: true,
    hint: "The agent's harness (claude-code, codex, opencode) crashed or exited non-zero; its last stderr lines are in the turn's error (berth logs SESSION). The turn is retried.",
  },
  HARNESS_TIMEOUT: {
    status: 504,
    retryable: true,
    hint: "The agent's harness ran past the agent's harnessTimeoutMs and was killed with its process group; raise harnessTimeoutMs or split the work.",
  },
  HARNESS_NOT_IN_IMAGE: {
    status: 400,
    retryable: false,
    hint: 'Build the image with the harness first: berth image build --with <harness> (or name an image that has it with --image).',
  },
  AGENT_IMAGE_MISSING: {
    status: 400,
    retryable: false,
    hint: "The agent names packages: its image (the base, its provider's harness, its packages) must be built first with the command in the message (berth image build [--with <harness>] --apt … --npm …), or name an image that holds them with --image.",
  },
  SCHEDULE_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List schedules with: berth schedule list [session]',
  },
  SCHEDULE_CANCELLED: {
    status: 409,
    retryable: false,
    hint: 'A cancelled schedule stays cancelled; create a new one.',
  },
  SCHEDULE_LIMIT: {
    status: 429,
    retryable: false,
    hint: "The agent's turns made as many live schedules as its maxSchedules allows; cancel some (berth schedule cancel ID) or raise maxSchedules.",
  },
  STORAGE_DENIED: {
    status: 403,
    retryable: false,
    hint: 'The operator grants storage per agent: berth grant <agent> --prefix photos/ --ops read,list,write,delete (see docs/storage.md).',
  },
  STORAGE_OBJECT_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List the keys that exist with GET /v1/storage?prefix=<folder/> (the storage_list tool).',
  },
  STORAGE_HASH_MISMATCH: {
    status: 400,
    retryable: false,
    hint: 'The body did not hash to the x-berth-sha256 header sent with it; nothing was stored. Send the content again.',
  },
  STORAGE_OBJECT_TOO_LARGE: {
    status: 413,
    retryable: false,
    hint: 'Store smaller objects (split them), or raise BERTH_STORAGE_MAX_OBJECT_BYTES on the host.',
  },
  STORAGE_BLOB_MISSING: {
    status: 500,
    retryable: false,
    hint: "The object's row names a blob the blob store does not have: it was lost, or it was written by a host with other blobs (file blobs are per machine; workers on several machines share an s3:// bucket: --blobs, docs/storage.md).",
  },
  BLOBS_UNREACHABLE: {
    status: 503,
    retryable: true,
    hint: 'Check --blobs / BERTH_BLOBS (file:///dir or s3://bucket/prefix), AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION, that the service runs and that the bucket exists (docs/config.md).',
  },
  CHECKPOINT_FAILED: {
    status: 503,
    retryable: true,
    hint: 'The checkpoint was not made (its upload or its record failed; nothing of it is used): the job may go on, and a retry resumes from the previous checkpoint. Check the blob store and the store if this repeats.',
  },
  CHECKPOINT_UNSUPPORTED: {
    status: 409,
    retryable: false,
    hint: "Checkpoints are for turns with an attempt layer; a resident agent's sandbox writes its workspace in place, and its turn's commit is what keeps its work. Commit (end the turn) instead.",
  },
  BLOB_WRITE_FAILED: {
    status: 503,
    retryable: true,
    hint: 'The blob store refused or lost the upload; nothing of it is visible. A turn waits about 20 s for it before giving up, then is retried with backoff (one try spent). If it repeats, check that the S3 service (or the blob dir) is up and has space.',
  },
  BLOB_READ_FAILED: {
    status: 503,
    retryable: true,
    hint: 'The blob store did not answer after retries with backoff (a turn waits about 20 s for it); try again once it is back (check the S3 service, or the blob dir).',
  },
  BLOB_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'No object has this key in the blob store; list the keys that exist under its prefix.',
  },
  BLOB_TOO_LARGE: {
    status: 413,
    retryable: false,
    hint: 'The body is over the size limit of this put; nothing was stored.',
  },
  BLOB_HASH_MISMATCH: {
    status: 400,
    retryable: false,
    hint: 'The body did not hash to the SHA-256 it was sent with; nothing was stored. Send the content again.',
  },
  GRANT_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: "List the agent's grants with: berth grant <agent> --list",
  },
  CHANNEL_NOT_FOUND: {
    status: 404,
    retryable: false,
    hint: 'List channels with: berth channel list',
  },
  CHANNEL_EXISTS: {
    status: 409,
    retryable: false,
    hint: 'Pick another --name, or remove the old channel first with: berth channel remove <id>',
  },
  CHANNEL_TOKEN_MISSING: {
    status: 400,
    retryable: false,
    hint: "Store the bot token (and Slack's signing secret) on the host first: berth secret set <name> (the value from @BotFather, or the Slack app's Bot User OAuth Token and Signing Secret), then name it with --token-secret <name> (--signing-secret <name>).",
  },
  CHANNEL_SIGNATURE_INVALID: {
    status: 401,
    retryable: false,
    hint: "The request is not signed by the platform with the channel's signing secret (Slack: or is older than 5 minutes; Telegram: its X-Telegram-Bot-Api-Secret-Token is not the channel's secret_token). Check that the secret named by the channel (berth channel list) holds the app's Signing Secret or the webhook's secret_token: berth secret set <name>.",
  },
  CHANNEL_NOT_ACCEPTING: {
    status: 503,
    retryable: true,
    hint: 'The channel is paused, or its signing secret is not in the host secret store; the platform retries the delivery later. Resume it with: berth channel resume <id>, or store the secret with: berth secret set <name>.',
  },
  CHANNEL_PLATFORM_FAILED: {
    status: 502,
    retryable: true,
    hint: "The chat platform refused or did not answer; the channel retries with backoff. See the channel's last error in: berth channel list",
  },
  NOT_FOUND: { status: 404, retryable: false, hint: 'See /v1 routes in docs/architecture.md.' },
  INTERNAL: { status: 500, retryable: true, hint: 'This is a bug in berth; the logs have the details.' },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export class BerthError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly hint: string;
  readonly retryable: boolean;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown; hint?: string }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'BerthError';
    this.code = code;
    this.status = ERRORS[code].status;
    this.retryable = ERRORS[code].retryable;
    this.hint = options?.hint ?? ERRORS[code].hint;
  }

  toJSON(): { error: { code: ErrorCode; message: string; hint: string } } {
    return { error: { code: this.code, message: this.message, hint: this.hint } };
  }
}

/** What an abort with this code does to its messages: retried (spending a try or not, at once or after backoff), held, interrupted, or failed now. */
export function abortPolicyOf(code: ErrorCode): {
  retryable: boolean;
  costsTry: boolean;
  holdsSession: boolean;
  lostSandbox: boolean;
  interrupts: boolean;
} {
  const spec: ErrorSpec = ERRORS[code];
  return {
    retryable: spec.retryable,
    costsTry: spec.costsTry !== false,
    holdsSession: spec.holdsSession === true,
    lostSandbox: spec.lostSandbox === true,
    interrupts: spec.interrupts === true,
  };
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERRORS, value);
}

export function isBerthError(err: unknown, code?: ErrorCode): err is BerthError {
  return err instanceof BerthError && (code === undefined || err.code === code);
}

/** A file system out of space (ENOSPC, or EDQUOT: a user's quota) anywhere in the error's cause chain. */
export function isNoSpace(err: unknown): boolean {
  for (let e = err; e instanceof Error; e = (e as { cause?: unknown }).cause) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOSPC' || code === 'EDQUOT') return true;
  }
  return false;
}

/** `err` as DISK_FULL when a file system ran out of space under it, else as it was. */
export function asDiskFull(err: unknown, what: string): unknown {
  if (!isNoSpace(err) || isBerthError(err, 'DISK_FULL')) return err;
  return new BerthError('DISK_FULL', `The data dir is full: ${what} failed (${(err as Error).message})`, {
    cause: err,
  });
}
