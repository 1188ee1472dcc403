/**
 * The one versioned schema of both stores, written in SQLite's dialect; the PostgreSQL
 * store applies each entry through toPostgresDdl (integers become BIGINT: times are epoch
 * ms). Append only: a released migration is never edited; a change is a new entry, in
 * SQL both engines accept (or marked `only` for one of them). Each store applies them in
 * order, one transaction each, exactly once even when several processes start together.
 */
import { sessionCountsDdl } from './session-counts-ddl.js';

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /** Applied by this store only. */
  only?: 'sqlite' | 'postgres';
}

export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE agents (
  name TEXT PRIMARY KEY,
  spec TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE sessions (
  id TEXT PRIMARY KEY,
  agent TEXT NOT NULL REFERENCES agents(name),
  generation INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT,
  sandbox TEXT,
  workspace_version INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE messages (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
  text TEXT NOT NULL,
  data TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'done', 'failed')),
  tries INTEGER NOT NULL DEFAULT 0,
  process_after INTEGER NOT NULL DEFAULT 0,
  turn_id TEXT,
  error TEXT,
  created_at INTEGER NOT NULL
);
CREATE INDEX messages_session ON messages(session_id, id);
CREATE INDEX messages_pending ON messages(process_after, id) WHERE status = 'pending';
CREATE TABLE turns (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  attempt INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  worker_id TEXT NOT NULL,
  sandbox TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'committed', 'aborted')),
  progress TEXT,
  error TEXT,
  message_ids TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE INDEX turns_session ON turns(session_id, started_at);
CREATE TABLE workers (
  id TEXT PRIMARY KEY,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  slots INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  started_at INTEGER NOT NULL
);
CREATE TABLE events (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL,
  type TEXT NOT NULL,
  data TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE INDEX events_session ON events(session_id, id);
CREATE TABLE audit (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  kind TEXT NOT NULL,
  session_id TEXT,
  generation INTEGER,
  data TEXT NOT NULL
);
`,
  },
  {
    version: 2,
    name: 'workspace layers and session state',
    sql: `
ALTER TABLE sessions ADD COLUMN pending_layer TEXT;
CREATE TABLE session_state (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  key TEXT NOT NULL,
  value TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, key)
);
`,
  },
  {
    version: 3,
    name: 'change listeners',
    // The UDP relay's peers; PostgreSQL has LISTEN/NOTIFY.
    only: 'sqlite',
    sql: `
CREATE TABLE change_listeners (
  port INTEGER PRIMARY KEY,
  pid INTEGER NOT NULL,
  started_at INTEGER NOT NULL
);
`,
  },
  {
    version: 4,
    name: 'tenants, api tokens and archived sessions',
    sql: `
ALTER TABLE agents ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE agents ADD COLUMN deleted_at INTEGER;
ALTER TABLE sessions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE sessions ADD COLUMN archived_at INTEGER;
CREATE INDEX sessions_tenant ON sessions(tenant, created_at);
CREATE TABLE api_tokens (
  id TEXT PRIMARY KEY,
  tenant TEXT,
  admin INTEGER NOT NULL CHECK (admin IN (0, 1)),
  hash TEXT NOT NULL UNIQUE,
  label TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  revoked_at INTEGER,
  CHECK ((admin = 1) = (tenant IS NULL))
);
`,
  },
  {
    version: 5,
    name: 'webhooks and their delivery log',
    sql: `
CREATE TABLE webhooks (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  agent TEXT,
  session_id TEXT,
  url TEXT NOT NULL,
  secret TEXT NOT NULL,
  events TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  deleted_at INTEGER,
  CHECK ((agent IS NULL) <> (session_id IS NULL))
);
CREATE INDEX webhooks_agent ON webhooks(agent) WHERE deleted_at IS NULL;
CREATE INDEX webhooks_session ON webhooks(session_id) WHERE deleted_at IS NULL;
CREATE TABLE webhook_deliveries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  webhook_id TEXT NOT NULL REFERENCES webhooks(id),
  event_id INTEGER NOT NULL REFERENCES events(id),
  status TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  last_error TEXT,
  created_at INTEGER NOT NULL,
  delivered_at INTEGER,
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at, id) WHERE status = 'pending';
CREATE TABLE webhook_attempts (
  delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries(id),
  attempt INTEGER NOT NULL,
  at INTEGER NOT NULL,
  status_code INTEGER,
  error TEXT,
  duration_ms INTEGER NOT NULL,
  PRIMARY KEY (delivery_id, attempt)
);
`,
  },
  {
    version: 6,
    name: 'indexes for turn and lease lookups',
    sql: `
CREATE INDEX messages_turn ON messages(turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX turns_running ON turns(session_id) WHERE status = 'running';
CREATE INDEX sessions_lease_owner ON sessions(lease_owner) WHERE lease_owner IS NOT NULL;
`,
  },
  {
    version: 7,
    name: 'model usage',
    sql: `
CREATE TABLE model_usage (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at INTEGER NOT NULL,
  agent TEXT NOT NULL,
  session_id TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL
);
CREATE INDEX model_usage_agent ON model_usage(agent, at);
CREATE INDEX model_usage_turn ON model_usage(turn_id);
`,
  },
  {
    version: 8,
    name: 'schedules',
    sql: `
CREATE TABLE schedules (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL,
  agent TEXT,
  tenant TEXT NOT NULL,
  cron TEXT NOT NULL,
  tz TEXT NOT NULL,
  message TEXT NOT NULL,
  missed TEXT NOT NULL CHECK (missed IN ('once', 'skip')),
  status TEXT NOT NULL CHECK (status IN ('active', 'paused', 'cancelled')),
  next_run_at INTEGER,
  last_run_at INTEGER,
  runs INTEGER NOT NULL DEFAULT 0,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules(next_run_at) WHERE status = 'active';
CREATE INDEX schedules_session ON schedules(session_id);
`,
  },
  {
    version: 9,
    name: 'agent-made schedules',
    // The turn whose commit created the schedule (schedule_message tool); NULL = made through the API.
    sql: `ALTER TABLE schedules ADD COLUMN created_by_turn TEXT;`,
  },
  {
    version: 10,
    name: 'mediated storage',
    sql: `
CREATE TABLE storage_grants (
  agent TEXT NOT NULL,
  prefix TEXT NOT NULL,
  ops TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (agent, prefix)
);
CREATE TABLE storage_objects (
  agent TEXT NOT NULL,
  key TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  size INTEGER NOT NULL,
  blob TEXT NOT NULL,
  session_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY (agent, key)
);
CREATE INDEX storage_objects_blob ON storage_objects(blob);
`,
  },
  {
    version: 11,
    name: 'resident recycle requests',
    // Latest operator request to replace the session's resident sandbox; its supervisor compares it with the sandbox's start.
    sql: `ALTER TABLE sessions ADD COLUMN recycle_requested_at INTEGER;`,
  },
  {
    version: 12,
    name: 'commit markers',
    // Each PostgreSQL write commits a random marker, so a COMMIT whose answer was lost can be settled (postgres/commit-marker.ts).
    only: 'postgres',
    sql: `
CREATE TABLE commit_markers (
  marker UUID PRIMARY KEY,
  created_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
);
`,
  },
  {
    version: 13,
    name: 'error codes',
    // The catalogue code beside the prose of why a turn ended and why a message was retried or failed.
    sql: `
ALTER TABLE turns ADD COLUMN error_code TEXT;
ALTER TABLE messages ADD COLUMN error_code TEXT;
`,
  },
  {
    version: 14,
    name: 'workspace chains',
    // A session's committed workspace as a chain of immutable objects in the blob store: the
    // layer each commit appended and the snapshots that compact them. turns.base_version is
    // the workspace version a committed turn ran on (its commit refuses any other).
    sql: `
CREATE TABLE workspace_layers (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  version INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('layer', 'snapshot')),
  blob_key TEXT NOT NULL,
  size INTEGER NOT NULL,
  turn_id TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, version, kind)
);
CREATE INDEX workspace_layers_blob ON workspace_layers(blob_key);
ALTER TABLE turns ADD COLUMN base_version INTEGER;
`,
  },
  {
    version: 15,
    name: 'commit marker probes',
    // A probe's row says "rolled back" for good, so asking again gives the same answer (postgres/commit-marker.ts).
    only: 'postgres',
    sql: `
ALTER TABLE commit_markers ADD COLUMN probe BOOLEAN NOT NULL DEFAULT false;
`,
  },
  {
    version: 16,
    name: 'queue keys',
    // Each session carries its place in the claim queue (queued_id: its oldest pending inbound
    // message; runnable_at: when the first of its pending messages is due), kept by every
    // transition that changes its pending messages, so the claim reads the queue's head, and
    // a position counts the entries ahead, on one index instead of grouping every pending
    // message. The sweep starts from stale worker rows (by heartbeat), and ETAs read the last
    // committed turns by end time. A lease held by a worker without a row gets a dead row
    // (heartbeat 0), so the sweep finds it by its holder as every other dead lease.
    sql: `
ALTER TABLE sessions ADD COLUMN queued_id INTEGER;
ALTER TABLE sessions ADD COLUMN runnable_at INTEGER;
UPDATE sessions SET
  queued_id = (SELECT MIN(m.id) FROM messages m WHERE m.session_id = sessions.id AND m.direction = 'in' AND m.status = 'pending'),
  runnable_at = (SELECT MIN(m.process_after) FROM messages m WHERE m.session_id = sessions.id AND m.direction = 'in' AND m.status = 'pending')
WHERE id IN (SELECT session_id FROM messages WHERE direction = 'in' AND status = 'pending');
CREATE INDEX sessions_queue ON sessions(queued_id, runnable_at) WHERE lease_owner IS NULL AND queued_id IS NOT NULL;
CREATE INDEX messages_pending_of_session ON messages(session_id, id) WHERE direction = 'in' AND status = 'pending';
CREATE INDEX workers_heartbeat ON workers(heartbeat_at);
CREATE INDEX turns_committed ON turns(ended_at) WHERE status = 'committed';
INSERT INTO workers (id, host, pid, slots, heartbeat_at, started_at)
SELECT DISTINCT lease_owner, '', 0, 0, 0, 0 FROM sessions
WHERE lease_owner IS NOT NULL AND lease_owner NOT IN (SELECT id FROM workers);
`,
  },
  {
    version: 17,
    name: 'replies name their messages, the oldest pending message holds the session',
    // A reply records the messages it answers (a command or script turn answers each of its
    // messages with its own reply); replies written before answered their whole turn. A
    // session is runnable only when its oldest pending message is due: one in backoff holds
    // the messages after it, so runnable_at is that message's process_after.
    sql: `
ALTER TABLE messages ADD COLUMN in_reply_to TEXT;
UPDATE messages SET in_reply_to = (SELECT t.message_ids FROM turns t WHERE t.id = messages.turn_id)
WHERE direction = 'out' AND turn_id IS NOT NULL;
UPDATE sessions SET runnable_at = (SELECT m.process_after FROM messages m WHERE m.id = sessions.queued_id)
WHERE queued_id IS NOT NULL;
`,
  },
  {
    version: 18,
    name: 'sandbox records',
    // Each sandbox's lifecycle as its worker reports it, warm ones included: its phase, what it
    // is bound to and why it ended. A report, not a transition: the lease and the generation
    // stay what fences, so the record never blocks a turn.
    sql: `
CREATE TABLE sandboxes (
  name TEXT PRIMARY KEY,
  worker_id TEXT NOT NULL,
  phase TEXT NOT NULL CHECK (phase IN ('creating', 'warm', 'bound', 'serving', 'draining', 'gone')),
  pooled INTEGER NOT NULL,
  session_id TEXT,
  generation INTEGER,
  turn_id TEXT,
  end_reason TEXT,
  end_message TEXT,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  ended_at INTEGER
);
CREATE INDEX sandboxes_worker ON sandboxes(worker_id) WHERE phase <> 'gone';
CREATE INDEX sandboxes_ended ON sandboxes(ended_at);
`,
  },
  {
    version: 19,
    name: 'where a resident workspace lives, and held sessions',
    // A resident agent writes its workspace in place, on one data dir: the session names
    // that data dir (an id made once per data dir), when a turn last wrote there, and the
    // epoch an operator's reset moves on. A session whose workspace a worker cannot find is
    // held: out of the claim queue (its queue keys stay null), its messages pending, with
    // the code and message of why, until an operator resumes it or resets its workspace.
    sql: `
ALTER TABLE sessions ADD COLUMN resident_holder TEXT;
ALTER TABLE sessions ADD COLUMN resident_holder_name TEXT;
ALTER TABLE sessions ADD COLUMN resident_written_at INTEGER;
ALTER TABLE sessions ADD COLUMN resident_epoch INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN held_at INTEGER;
ALTER TABLE sessions ADD COLUMN held_code TEXT;
ALTER TABLE sessions ADD COLUMN held_error TEXT;
`,
  },
  {
    version: 20,
    name: 'cancelled and interrupted messages, interrupted turns',
    // A queued message can be taken back (cancelled) and a running turn interrupted by its
    // user: new final states, and the time the interrupt was asked for on the turn (its
    // commit refuses from then on). SQLite cannot change a CHECK: both tables are rebuilt.
    only: 'sqlite',
    sql: `
CREATE TABLE messages_next (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  direction TEXT NOT NULL CHECK (direction IN ('in', 'out')),
  text TEXT NOT NULL,
  data TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled', 'interrupted')),
  tries INTEGER NOT NULL DEFAULT 0,
  process_after INTEGER NOT NULL DEFAULT 0,
  turn_id TEXT,
  error TEXT,
  created_at INTEGER NOT NULL,
  error_code TEXT,
  in_reply_to TEXT
);
INSERT INTO messages_next (id, session_id, direction, text, data, status, tries, process_after, turn_id, error, created_at, error_code, in_reply_to)
SELECT id, session_id, direction, text, data, status, tries, process_after, turn_id, error, created_at, error_code, in_reply_to FROM messages;
DROP TABLE messages;
ALTER TABLE messages_next RENAME TO messages;
CREATE INDEX messages_session ON messages(session_id, id);
CREATE INDEX messages_pending ON messages(process_after, id) WHERE status = 'pending';
CREATE INDEX messages_turn ON messages(turn_id) WHERE turn_id IS NOT NULL;
CREATE INDEX messages_pending_of_session ON messages(session_id, id) WHERE direction = 'in' AND status = 'pending';
CREATE TABLE turns_next (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES sessions(id),
  attempt INTEGER NOT NULL,
  generation INTEGER NOT NULL,
  worker_id TEXT NOT NULL,
  sandbox TEXT,
  status TEXT NOT NULL CHECK (status IN ('running', 'committed', 'aborted', 'interrupted')),
  progress TEXT,
  error TEXT,
  message_ids TEXT NOT NULL,
  started_at INTEGER NOT NULL,
  ended_at INTEGER,
  error_code TEXT,
  base_version INTEGER,
  interrupt_requested_at INTEGER
);
INSERT INTO turns_next (id, session_id, attempt, generation, worker_id, sandbox, status, progress, error, message_ids, started_at, ended_at, error_code, base_version)
SELECT id, session_id, attempt, generation, worker_id, sandbox, status, progress, error, message_ids, started_at, ended_at, error_code, base_version FROM turns;
DROP TABLE turns;
ALTER TABLE turns_next RENAME TO turns;
CREATE INDEX turns_session ON turns(session_id, started_at);
CREATE INDEX turns_running ON turns(session_id) WHERE status = 'running';
CREATE INDEX turns_committed ON turns(ended_at) WHERE status = 'committed';
`,
  },
  {
    version: 20,
    name: 'cancelled and interrupted messages, interrupted turns',
    // The same as SQLite's version 20, where a CHECK can be replaced in place.
    only: 'postgres',
    sql: `
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
  CHECK (status IN ('pending', 'processing', 'done', 'failed', 'cancelled', 'interrupted'));
ALTER TABLE turns DROP CONSTRAINT turns_status_check;
ALTER TABLE turns ADD CONSTRAINT turns_status_check CHECK (status IN ('running', 'committed', 'aborted', 'interrupted'));
ALTER TABLE turns ADD COLUMN interrupt_requested_at INTEGER;
`,
  },
  {
    version: 21,
    name: 'draining workers',
    // Set once, when a worker begins to drain (its SIGTERM, or an operator's request): it
    // claims nothing more, and status shows it until its row goes at its clean stop.
    sql: `
ALTER TABLE workers ADD COLUMN draining_since INTEGER;
`,
  },
  {
    version: 22,
    name: 'snapshots of several objects',
    // A rewind makes a new version whose tree is an older one's: its snapshot is the objects
    // that already make that tree (a snapshot and the layers after it), named again in order,
    // so no byte is copied. A snapshot row therefore has parts (0, 1, …) applied in order; a
    // snapshot written by compaction has one. rewound_to is the version a rewind's snapshot
    // holds the tree of (NULL for compaction's, which alone drops older rows). SQLite cannot
    // change a primary key: the table is rebuilt with its index.
    only: 'sqlite',
    sql: `
CREATE TABLE workspace_layers_next (
  session_id TEXT NOT NULL REFERENCES sessions(id),
  version INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('layer', 'snapshot')),
  part INTEGER NOT NULL DEFAULT 0,
  rewound_to INTEGER,
  blob_key TEXT NOT NULL,
  size INTEGER NOT NULL,
  turn_id TEXT,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, version, kind, part)
);
INSERT INTO workspace_layers_next (session_id, version, kind, part, blob_key, size, turn_id, created_at)
SELECT session_id, version, kind, 0, blob_key, size, turn_id, created_at FROM workspace_layers;
DROP TABLE workspace_layers;
ALTER TABLE workspace_layers_next RENAME TO workspace_layers;
CREATE INDEX workspace_layers_blob ON workspace_layers(blob_key);
`,
  },
  {
    version: 22,
    name: 'snapshots of several objects',
    // The same as SQLite's version 22, where a primary key can be replaced in place.
    only: 'postgres',
    sql: `
ALTER TABLE workspace_layers ADD COLUMN part INTEGER NOT NULL DEFAULT 0;
ALTER TABLE workspace_layers ADD COLUMN rewound_to INTEGER;
ALTER TABLE workspace_layers DROP CONSTRAINT workspace_layers_pkey;
ALTER TABLE workspace_layers ADD PRIMARY KEY (session_id, version, kind, part);
`,
  },
  {
    version: 23,
    name: 'checkpoints of running turns',
    // A checkpoint belongs to the work of a session's lead message (the first message of the
    // turn that made it): a retry of those messages, a new turn, resumes from it. Its object
    // holds the changes since its base (0: the committed tree), so a resume follows the bases
    // back from the newest row and never applies one whose base it skipped. Rows go at
    // the commit (in its transaction) and in the sweep once the message is no longer pending
    // or processing; no foreign key, so a deleted session's rows are swept the same way.
    sql: `
CREATE TABLE turn_checkpoints (
  session_id TEXT NOT NULL,
  message_id INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  base_seq INTEGER NOT NULL,
  count INTEGER NOT NULL,
  turn_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  label TEXT NOT NULL,
  blob_key TEXT NOT NULL,
  size INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, message_id, seq)
);
CREATE INDEX turn_checkpoints_blob ON turn_checkpoints(blob_key);
`,
  },
  {
    version: 24,
    name: 'channels',
    // A channel (Telegram, …) polled by one host process at a time (lease_owner/lease_until);
    // `cursor` is the next platform offset, moved in the transaction that enqueues the
    // update's message. channel_sessions names where a session's replies go,
    // channel_messages the platform's id of each inbound message (replies answer it), and
    // channel_outbox holds each send, written in the transaction of its event (or of the
    // refused update), with the platform's message ids once sent.
    sql: `
CREATE TABLE channels (
  id TEXT PRIMARY KEY,
  tenant TEXT NOT NULL,
  platform TEXT NOT NULL,
  agent TEXT NOT NULL,
  mapping TEXT NOT NULL CHECK (mapping IN ('per-chat', 'per-user')),
  allow_users TEXT NOT NULL,
  allow_chats TEXT NOT NULL,
  token_secret TEXT NOT NULL,
  paused INTEGER NOT NULL DEFAULT 0,
  cursor INTEGER NOT NULL DEFAULT 0,
  lease_owner TEXT,
  lease_until INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  created_at INTEGER NOT NULL,
  deleted_at INTEGER
);
CREATE TABLE channel_sessions (
  session_id TEXT PRIMARY KEY,
  channel_id TEXT NOT NULL REFERENCES channels(id),
  chat_id TEXT NOT NULL,
  created_at INTEGER NOT NULL
);
CREATE TABLE channel_messages (
  message_id INTEGER PRIMARY KEY,
  channel_id TEXT NOT NULL REFERENCES channels(id),
  chat_id TEXT NOT NULL,
  platform_message_id TEXT NOT NULL,
  update_id INTEGER NOT NULL
);
CREATE TABLE channel_refusals (
  channel_id TEXT NOT NULL REFERENCES channels(id),
  chat_id TEXT NOT NULL,
  last_at INTEGER NOT NULL,
  PRIMARY KEY (channel_id, chat_id)
);
CREATE TABLE channel_outbox (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  channel_id TEXT NOT NULL REFERENCES channels(id),
  chat_id TEXT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('reply', 'failure', 'refusal')),
  event_id INTEGER,
  text TEXT NOT NULL,
  reply_to TEXT,
  status TEXT NOT NULL CHECK (status IN ('pending', 'sent', 'dead')),
  attempts INTEGER NOT NULL DEFAULT 0,
  next_attempt_at INTEGER NOT NULL,
  taken_by TEXT,
  parts_sent INTEGER NOT NULL DEFAULT 0,
  platform_message_ids TEXT NOT NULL DEFAULT '[]',
  last_error TEXT,
  created_at INTEGER NOT NULL,
  sent_at INTEGER
);
CREATE INDEX channel_outbox_pending ON channel_outbox(channel_id, id) WHERE status = 'pending';
`,
  },
  ...[
    { only: 'sqlite' as const, ddl: sessionCountsDdl('sqlite') },
    { only: 'postgres' as const, ddl: sessionCountsDdl('postgres') },
  ].map(({ only, ddl }) => ({
    version: 25,
    name: 'kept counts, paged session listing',
    // Status and metrics read counts the store keeps (session-counts-ddl.ts) rather than every
    // session; the session listing reads one page at a time, in creation order, on an index.
    only,
    sql: `${ddl}
CREATE INDEX sessions_listing ON sessions(created_at, id);
`,
  })),
  {
    version: 26,
    name: 'tenant fair share',
    // Claims are shared between tenants by start-time fair queuing: each tenant's `pass` is
    // the virtual time at which its next claim starts, moved by 1,000,000 / weight per claim
    // (integers in both engines); `last_start` is where its last claim started, and the
    // largest of them is the queue's virtual time, so a tenant back from idle starts there
    // rather than cashing in the time it was away. sessions_tenant_queue is each tenant's
    // part of the claim queue, in the order of sessions_queue.
    sql: `
CREATE TABLE tenant_shares (
  tenant TEXT PRIMARY KEY,
  weight INTEGER NOT NULL DEFAULT 1 CHECK (weight >= 1),
  pass INTEGER NOT NULL DEFAULT 0,
  last_start INTEGER NOT NULL DEFAULT 0
);
INSERT INTO tenant_shares (tenant) SELECT tenant FROM agents UNION SELECT tenant FROM sessions;
CREATE INDEX sessions_tenant_queue ON sessions(tenant, queued_id, runnable_at) WHERE lease_owner IS NULL AND queued_id IS NOT NULL;
`,
  },
  {
    version: 27,
    name: 'model-call journal',
    // Each completed upstream answer of a model call made inside a turn, keyed by a hash of
    // its request, for the work on the turn's lead message (as turn_checkpoints): a retry
    // that repeats the request is answered from here, without paying the call again. Rows
    // go with that work's checkpoints: at the commit (in its transaction) and in the sweep.
    sql: `
CREATE TABLE model_journal (
  session_id TEXT NOT NULL,
  message_id INTEGER NOT NULL,
  request_hash TEXT NOT NULL,
  turn_id TEXT NOT NULL,
  generation INTEGER NOT NULL,
  status INTEGER NOT NULL,
  content_type TEXT NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (session_id, message_id, request_hash)
);
`,
  },
  {
    version: 28,
    name: 'pushed channel events (Slack)',
    // A platform that pushes its events (Slack's Events API) is acknowledged once its
    // event is committed: channel_events holds each event id applied, inserted in the
    // transaction that enqueues its message, so a retried delivery finds it and writes
    // nothing; ids are forgotten a day on, long after Slack's last retry. per_thread stands for the mapping 'per-thread' (stored as 'per-chat' plus
    // this flag: SQLite cannot change the CHECK of a table others reference).
    sql: `
ALTER TABLE channels ADD COLUMN signing_secret TEXT;
ALTER TABLE channels ADD COLUMN respond_to TEXT NOT NULL DEFAULT 'all';
ALTER TABLE channels ADD COLUMN per_thread INTEGER NOT NULL DEFAULT 0;
CREATE TABLE channel_events (
  channel_id TEXT NOT NULL REFERENCES channels(id),
  event_id TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (channel_id, event_id)
);
CREATE INDEX channel_events_age ON channel_events(channel_id, created_at);
`,
  },
  {
    version: 30,
    name: 'email channels',
    // An email channel's servers and address (JSON: EmailSettings), null on a chat platform.
    // Inbound mail needs no table of its own: each is committed under its Message-ID in
    // channel_events, and acknowledged at the server (\Seen) only after that commit.
    sql: `
ALTER TABLE channels ADD COLUMN email TEXT;
`,
  },
  {
    version: 31,
    name: 'channel connection modes (Slack Socket Mode, Telegram webhooks)',
    // app_token_secret names Slack's app-level token: set, the lease holder opens a Socket
    // Mode connection instead of taking events over HTTP. webhook_url is berth's public
    // base URL: set, Telegram POSTs its updates there instead of being polled.
    sql: `
ALTER TABLE channels ADD COLUMN app_token_secret TEXT;
ALTER TABLE channels ADD COLUMN webhook_url TEXT;
`,
  },
  {
    version: 32,
    name: 'files sent to chats',
    // A file a turn wrote under outbox/ is one more send owed to the chat: a row of kind
    // reply whose `file` (JSON: name, blob key, size) is sent as a document after the text.
    sql: `
ALTER TABLE channel_outbox ADD COLUMN file TEXT;
`,
  },
  {
    version: 33,
    name: 'worker control endpoints',
    // Where the API reaches a worker for an operation on a live sandbox (docs/sandbox-api.md)
    // and the bearer key it presents: drawn by the worker process at start, written with its
    // registration. Null for a worker that serves none (an older one).
    sql: `
ALTER TABLE workers ADD COLUMN control_url TEXT;
ALTER TABLE workers ADD COLUMN control_key TEXT;
`,
  },
  {
    version: 34,
    name: 'resident workspace captures',
    // The workspace version whose chain tree is a capture of the resident workspace (taken
    // after that version's commit), and when: another data dir may materialise it from the
    // chain only when no resident commit came after it.
    sql: `
ALTER TABLE sessions ADD COLUMN resident_captured_version INTEGER;
ALTER TABLE sessions ADD COLUMN resident_captured_at INTEGER;
`,
  },
];

/** SQLite's column types in PostgreSQL's: every integer 64-bit, AUTOINCREMENT keys as BIGSERIAL. */
export function toPostgresDdl(sql: string): string {
  return sql
    .replace(/\bINTEGER PRIMARY KEY AUTOINCREMENT\b/g, 'BIGSERIAL PRIMARY KEY')
    .replace(/\bINTEGER\b/g, 'BIGINT');
}

export function migrationsFor(store: 'sqlite' | 'postgres'): Migration[] {
  return MIGRATIONS.filter((m) => m.only === undefined || m.only === store);
}
