/**
 * A turn's timeline (GET /v1/sessions/:id/turns/:turn/timeline, the dashboard's session
 * page, `berth logs --turn`): each try of its messages, and within each the model calls,
 * tool calls, checkpoints and progress it made, how it ended (a kill says so, with its
 * code) and where the next try resumed. Built from what the store already keeps: the
 * `turns` rows of the tries, their session events (progress, checkpoint, retrying, reply)
 * and the model proxy's usage rows. No I/O.
 *
 * Invariants:
 * - Entries are ordered by time; at one instant a try's start comes first and its end last.
 * - A try resumes from the newest checkpoint of the work recorded before it started: the
 *   one the worker restores (nothing of the work can record a checkpoint between the end
 *   of one try and the start of the next). A restore that failed started from the committed
 *   tree instead; the store does not record that (the worker logs it).
 * - Model calls are the calls that went upstream (a usage row each); a call a retry repeats
 *   is answered from the journal and is neither paid nor listed again.
 */
import { TOOL_PROGRESS } from './protocol.js';
import { formatBytes, oneLine } from './text.js';
import type { SessionEvent, Turn, TurnRecord } from './types.js';

export type TimelineKind =
  | 'try-started'
  | 'resumed'
  | 'model-call'
  | 'tool-call'
  | 'checkpoint'
  | 'progress'
  | 'reply'
  | 'try-ended';

export interface TimelineEntry {
  /** Epoch ms. */
  at: number;
  kind: TimelineKind;
  /** The try it belongs to. */
  turnId: string;
  attempt: number;
  /** One line for people: what happened. */
  detail: string;
  /** model-call: its number in the turn (1-based, across tries); checkpoint, resumed: the checkpoint's number. */
  seq?: number;
  /** checkpoint: the bytes its object holds (0: nothing changed). */
  bytes?: number;
  /** checkpoint: its label (`model-call` at a model call, a job's own otherwise). */
  label?: string;
  /** model-call: the checkpoint taken right before it went upstream. */
  checkpoint?: number;
  inputTokens?: number;
  outputTokens?: number;
  /** tool-call: the tool, when it returned (null: it never did) and whether it failed. */
  tool?: string;
  endedAt?: number | null;
  isError?: boolean;
  /** try-ended: how (committed, aborted, interrupted) and the catalogue code of an abort. */
  status?: Turn['status'];
  code?: string | null;
  /** resumed: model calls earlier tries paid (journalled: a repeat is not paid again). */
  modelCallsBefore?: number;
}

/** One try of the turn's messages, as the timeline's bars show it. */
export interface TimelineTry {
  turnId: string;
  attempt: number;
  startedAt: number;
  /** null while it runs. */
  endedAt: number | null;
  status: Turn['status'];
  code: string | null;
  error: string | null;
  /** The checkpoint it resumed from; null when it started from the committed workspace. */
  resumedFrom: number | null;
}

/** GET /v1/sessions/:id/turns/:turn/timeline */
export interface TurnTimeline {
  sessionId: string;
  /** The turn asked for (any of its tries names the same timeline). */
  turnId: string;
  /**
   * Whether its work goes on: a try runs, or its messages wait for the next try (a backoff).
   * A client polls, or follows the session's events, until it is false.
   */
  running: boolean;
  tries: TimelineTry[];
  entries: TimelineEntry[];
  /** The store read the session's events up to its bound: the entries after it are left out. */
  truncated: boolean;
}

/** One upstream model call, as the store keeps it (a usage row). */
export interface ModelCallRecord {
  turnId: string;
  at: number;
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
}

/** What the store holds of a turn's tries, for buildTurnTimeline. */
export interface TurnActivity {
  /** The session's events of the tries (any type; those of other turns are ignored), oldest first. */
  events: SessionEvent[];
  modelCalls: ModelCallRecord[];
  /** The read stopped at its bound (a very long turn): the newest events are not in `events`. */
  truncated: boolean;
}

/** Entries at one instant: the start of a try first, its end last. */
const RANK: Record<TimelineKind, number> = {
  'try-started': 0,
  resumed: 1,
  checkpoint: 2,
  'model-call': 3,
  'tool-call': 4,
  progress: 5,
  reply: 6,
  'try-ended': 7,
};

export function buildTurnTimeline(
  record: Pick<TurnRecord, 'turn' | 'attempts' | 'messages'>,
  activity: TurnActivity,
): TurnTimeline {
  const tries = [...record.attempts].sort((a, b) => a.startedAt - b.startedAt || a.attempt - b.attempt);
  const byId = new Map(tries.map((t) => [t.id, t]));
  const entries: TimelineEntry[] = [];
  const add = (t: Turn, e: Omit<TimelineEntry, 'turnId' | 'attempt'>) =>
    entries.push({ turnId: t.id, attempt: t.attempt, ...e });

  const checkpoints: { turn: Turn; at: number; seq: number; label: string; bytes: number }[] = [];
  const retryInMs = new Map<string, number>();
  const tools = new Map<string, TimelineEntry>();
  for (const e of activity.events) {
    const t = byId.get(String(e.data.turnId));
    if (!t) continue;
    const d = e.data;
    switch (e.type) {
      case 'checkpoint': {
        const seq = Number(d.seq);
        const label = String(d.label);
        const bytes = Number(d.bytes ?? 0);
        checkpoints.push({ turn: t, at: e.createdAt, seq, label, bytes });
        add(t, {
          at: e.createdAt,
          kind: 'checkpoint',
          seq,
          label,
          bytes,
          detail: `checkpoint ${seq}  (${label}, ${formatBytes(bytes)})`,
        });
        break;
      }
      case 'progress': {
        const text = String(d.text);
        const tool = TOOL_PROGRESS.exec(text);
        if (!tool) {
          add(t, { at: e.createdAt, kind: 'progress', detail: text });
          break;
        }
        const [, name = '', phase, failed] = tool;
        const key = `${t.id}\n${name}`;
        if (phase === 'started') {
          add(t, { at: e.createdAt, kind: 'tool-call', tool: name, endedAt: null, detail: `tool ${name}` });
          tools.set(key, entries.at(-1)!);
        } else {
          const open = tools.get(key);
          if (!open) break;
          tools.delete(key);
          open.endedAt = e.createdAt;
          open.isError = failed !== undefined;
          open.detail = `tool ${name}  (${e.createdAt - open.at} ms${open.isError ? ', failed' : ''})`;
        }
        break;
      }
      case 'retrying':
        if (typeof d.retryInMs === 'number') retryInMs.set(t.id, d.retryInMs);
        break;
      case 'reply':
        add(t, { at: e.createdAt, kind: 'reply', detail: `reply: ${oneLine(String(d.text ?? ''), 80)}` });
        break;
    }
  }

  const calls = [...activity.modelCalls].filter((c) => byId.has(c.turnId)).sort((a, b) => a.at - b.at);
  calls.forEach((c, i) => {
    const t = byId.get(c.turnId)!;
    // The checkpoint the proxy took before forwarding this call: its try's newest model-call one since the previous call.
    const after = i > 0 && calls[i - 1]!.turnId === c.turnId ? calls[i - 1]!.at : t.startedAt;
    const cp = checkpoints.findLast(
      (k) => k.turn === t && k.label === 'model-call' && k.at >= after && k.at <= c.at,
    );
    add(t, {
      at: c.at,
      kind: 'model-call',
      seq: i + 1,
      ...(cp ? { checkpoint: cp.seq } : {}),
      inputTokens: c.inputTokens,
      outputTokens: c.outputTokens,
      detail: `model call ${i + 1}  (${cp ? `checkpoint ${cp.seq}, ${formatBytes(cp.bytes)}; ` : ''}${c.inputTokens} in / ${c.outputTokens} out tokens)`,
    });
  });

  const timelineTries = tries.map((t, i): TimelineTry => {
    let resumedFrom: number | null = null;
    if (i > 0) {
      const earlier = new Set(tries.slice(0, i));
      const from = checkpoints.findLast((k) => earlier.has(k.turn) && k.at <= t.startedAt);
      const paid = calls.filter((c) => earlier.has(byId.get(c.turnId)!)).length;
      if (from) {
        resumedFrom = from.seq;
        add(t, {
          at: t.startedAt,
          kind: 'resumed',
          seq: from.seq,
          label: from.label,
          modelCallsBefore: paid,
          detail: `resumed from checkpoint ${from.seq}  (${from.label}${paid ? `; ${paid} earlier model call${paid === 1 ? '' : 's'} journalled, not paid again` : ''})`,
        });
      }
    }
    add(t, {
      at: t.startedAt,
      kind: 'try-started',
      detail: `try ${t.attempt} started  (worker ${t.workerId}${t.sandbox ? `, sandbox ${t.sandbox}` : ''})`,
    });
    if (t.endedAt !== null) {
      const retry = retryInMs.get(t.id);
      const why = t.errorCode ? ` ${t.errorCode}` : '';
      add(t, {
        at: t.endedAt,
        kind: 'try-ended',
        status: t.status,
        code: t.errorCode,
        detail: `try ${t.attempt} ${t.status}${why}${t.error ? `: ${oneLine(t.error, 100)}` : ''}${retry === undefined ? '' : retry === 0 ? '  (retried at once)' : `  (retry in ${retry} ms)`}`,
      });
    }
    return {
      turnId: t.id,
      attempt: t.attempt,
      startedAt: t.startedAt,
      endedAt: t.endedAt,
      status: t.status,
      code: t.errorCode,
      error: t.error,
      resumedFrom,
    };
  });

  entries.sort((a, b) => a.at - b.at || RANK[a.kind] - RANK[b.kind]);
  return {
    sessionId: record.turn.sessionId,
    turnId: record.turn.id,
    running:
      tries.at(-1)?.endedAt === null ||
      record.messages.some((m) => m.status === 'pending' || m.status === 'processing'),
    tries: timelineTries,
    entries,
    truncated: activity.truncated,
  };
}
