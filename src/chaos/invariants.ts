/**
 * The invariant checker of a chaos run, from the store snapshot, the workspaces on disk,
 * the Docker engine and /proc, after every berth process has exited.
 *
 *   exactly-one-reply   every inbound message has one committed reply naming it (its
 *                       inReplyTo; none if berth failed it); no reply comes from a turn
 *                       that did not commit
 *   replies-in-order, reply-attribution, outcomes-agree
 *                       replies answer messages in the order they were accepted, each
 *                       reply is its own message's, and each request's outcome is the
 *                       store's (reply-invariants.ts)
 *   acknowledged-kept   what berth acknowledged is in the store: every message whose POST
 *                       got its 202 (id) is there, and every reply a client received is
 *                       there, by its id, from a committed turn that took that message,
 *                       naming it, with the same text and data (a store failover must lose
 *                       none)
 *   committed-workspace the whole committed tree (every path, content and dir) and the
 *                       whole state are what the committed messages write (workspace-tree.ts:
 *                       each once, in order, nothing else); their count k (a turn may take
 *                       several) is between the session's ok requests and those plus its
 *                       unknown ones; on nodes, the tree as the session's chain in the blob
 *                       store has it
 *   chain-*, workspace-from-chain, never-behind
 *                       the workspace chains, from the store and the blob store alone
 *                       (chain-invariants.ts)
 *   no-partial-reads    no turn failed an assertFile/assertState step, but one of a message
 *                       excused by excuses.ts (an earlier message of its session ended
 *                       fail or unknown), which is listed as excused
 *   no-stray-process    no turn failed the workload's stray-process check (STRAY_PROCESS_CHECK)
 *   no-failed-steps     no other script step failed, and no STEP_FAILED turn lacks its step
 *   turns-ended         no turn is still `running`, no layer still pending promotion
 *   clean-shutdown      every berth process was alive when the workload ended (the killed
 *                       worker: its restart) and exited 0 on SIGTERM
 *   no-orphan-*         see orphans.ts: containers, mounts, slots, run dirs, layers,
 *                       processes; on nodes, on every machine (the API's and each node's:
 *                       node-set.ts)
 *
 * A failed step is read from structured evidence, never from an error's text: the progress
 * event the runner writes with `failedStep` before it cleans up (so it is there even when
 * the sandbox died before its abort arrived, or a sandbox limit gave the abort its own
 * code), and the turn's error_code STEP_FAILED. Which kind of step failed comes from the
 * message's own plan at the reported index.
 *
 * Invariants of this module: it only reads; each named invariant appears exactly once in
 * the result, with `details` naming the offending ids (capped, see invariant-result.ts);
 * a file it cannot read for any reason but its absence fails the invariant that reads it.
 */
import { isDeepStrictEqual } from 'node:util';
import type Dockerode from 'dockerode';
import type { BlobStore } from '../blobs/index.js';
import { workspaceLayout } from '../workspace/index.js';
import { checkChains } from './chain-invariants.js';
import { excusedMessages } from './excuses.js';
import { type InvariantResult, result } from './invariant-result.js';
import { orphans } from './orphans.js';
import { checkReplies, repliesByMessage } from './reply-invariants.js';
import type { RequestRecord } from './session-driver.js';
import { committedMessageCount, reportedSteps, type SessionSnapshot } from './snapshot.js';
import { readPlan, STRAY_PROCESS_CHECK } from './workload.js';
import { expectedEffects, readTree, type Tree, treeDiff, workloadState } from './workspace-tree.js';

export interface ProcessEnd {
  name: string;
  /** Running when the workload ended. */
  alive: boolean;
  /** How its latest earlier incarnation ended, if one did (the injected SIGKILL, or a crash). */
  lastExit: { code: number | null; signal: string | null; at: number } | null;
  /** How it ended on our SIGTERM. */
  stop: { code: number | null; signal: string | null; forced: boolean };
}

export interface CheckInput {
  dataDir: string;
  installId: string;
  docker: Dockerode;
  sessions: SessionSnapshot[];
  requests: RequestRecord[];
  processes: ProcessEnd[];
  /** The run's blob store, where the sessions' workspace chains are. */
  blobs: BlobStore;
  /** A run on nodes: no one data dir holds the workspaces, and each machine is looked at for leftovers. */
  nodes?: { orphans(): Promise<InvariantResult[]> };
}

export async function checkInvariants(input: CheckInput): Promise<InvariantResult[]> {
  const excused = excusedMessages(input.requests);
  const chains = await checkChains(input.sessions, input.blobs, excused);
  const fromChain: ReadTree = async (id) => {
    const tree = chains.committedTrees.get(id);
    return tree ? { tree } : { error: 'its chain could not be materialised' };
  };
  return [
    exactlyOneReply(input),
    ...checkReplies(input.sessions, input.requests),
    acknowledgedKept(input),
    await committedWorkspace(input, input.nodes ? fromChain : committedDirOf(input.dataDir)),
    ...chains.results,
    ...failedSteps(input.sessions, excused),
    turnsEnded(input.sessions),
    cleanShutdown(input.processes),
    ...(input.nodes
      ? await input.nodes.orphans()
      : await orphans([
          {
            name: 'this machine',
            dataDir: input.dataDir,
            installId: input.installId,
            docker: input.docker,
            workerDirs: 'required',
          },
        ])),
  ];
}

/**
 * Inbound ids lost (done or failed inconsistently, or never answered), duplicated (> 1 reply)
 * and unfinished (still pending at shutdown: durable, they would run at the next start).
 */
export function countReplies(sessions: SessionSnapshot[]) {
  const lost: number[] = [];
  const unfinished: number[] = [];
  const duplicated: number[] = [];
  const details: string[] = [];
  let inbound = 0;
  for (const s of sessions) {
    const committed = new Set(s.turns.filter((t) => t.status === 'committed').map((t) => t.id));
    for (const out of s.messages.filter((m) => m.direction === 'out'))
      if (out.turnId === null || !committed.has(out.turnId))
        details.push(`${s.id}: reply ${out.id} comes from turn ${out.turnId}, which did not commit`);
    const replies = repliesByMessage(s);
    for (const m of s.messages.filter((x) => x.direction === 'in')) {
      inbound++;
      const n = replies.get(m.id)?.length ?? 0;
      if (n > 1) duplicated.push(m.id);
      if (n > 1) details.push(`${s.id}: message ${m.id} has ${n} replies`);
      if (n === 1 && m.status !== 'done')
        details.push(`${s.id}: message ${m.id} has a reply but is ${m.status}`);
      if (n === 0 && (m.status === 'pending' || m.status === 'processing')) unfinished.push(m.id);
      else if (n === 0 && m.status !== 'failed') {
        lost.push(m.id);
        details.push(
          `${s.id}: message ${m.id} (${m.status}, ${m.tries} tries) has no reply and was not failed`,
        );
      }
    }
  }
  return { inbound, lost, duplicated, unfinished, details };
}

/** What clients were told that the store does not hold: acknowledged messages and received replies, one line each. */
export function acknowledgedMissing(sessions: SessionSnapshot[], requests: RequestRecord[]): string[] {
  const bySession = new Map(sessions.map((s) => [s.id, s]));
  const missing: string[] = [];
  for (const r of requests) {
    if (r.messageId === null) continue;
    const s = bySession.get(r.session);
    if (!s?.messages.some((m) => m.id === r.messageId && m.direction === 'in')) {
      missing.push(`${r.session} turn ${r.turn}: message ${r.messageId} was acknowledged but is not stored`);
      continue;
    }
    if (r.outcome !== 'ok') continue;
    const reply = s.messages.find((m) => m.direction === 'out' && m.id === r.reply?.id);
    const turn = s.turns.find((t) => t.id === reply?.turnId);
    const kept =
      reply !== undefined &&
      turn?.status === 'committed' &&
      turn.messageIds.includes(r.messageId) &&
      reply.inReplyTo?.includes(r.messageId) === true &&
      reply.text === r.replyText &&
      isDeepStrictEqual(reply.data ?? null, r.reply?.data);
    if (!kept)
      missing.push(
        `${r.session} turn ${r.turn}: the reply the client received to message ${r.messageId} is not stored`,
      );
  }
  return missing;
}

function acknowledgedKept({ sessions, requests }: CheckInput): InvariantResult {
  const acknowledged = requests.filter((r) => r.messageId !== null).length;
  const replies = requests.filter((r) => r.outcome === 'ok').length;
  const missing = acknowledgedMissing(sessions, requests);
  return result(
    'acknowledged-kept',
    `${acknowledged} acknowledged messages and ${replies} received replies: ${missing.length} not in the store`,
    missing,
  );
}

function exactlyOneReply({ sessions, requests }: CheckInput): InvariantResult {
  const { inbound, lost, duplicated, unfinished, details } = countReplies(sessions);
  const byId = new Map(sessions.flatMap((s) => s.messages).map((m) => [m.id, m]));
  // Unfinished still breaks "exactly one reply", but it is not a loss: the message is durable and
  // would run at the next start. Say whether its client had already given up (request unknown).
  const givenUp = new Set(requests.filter((r) => r.outcome === 'unknown').map((r) => r.session));
  for (const id of unfinished) {
    const m = byId.get(id)!;
    const what = `${m.sessionId}: message ${id} still ${m.status} at shutdown (${m.tries} tries)`;
    details.push(
      givenUp.has(m.sessionId) ? `${what}; its request ended unknown` : `${what}, no client gave up on it`,
    );
  }
  return result(
    'exactly-one-reply',
    `${inbound} inbound messages: ${lost.length} lost, ${duplicated.length} duplicated, ${unfinished.length} unfinished`,
    details,
  );
}

/** A session's committed tree, or why it could not be read. */
export type ReadTree = (sessionId: string) => Promise<{ tree: Tree } | { error: string }>;

/** The committed dir on the run's one data dir. */
export function committedDirOf(dataDir: string): ReadTree {
  return async (id) => {
    const dir = workspaceLayout(dataDir).committedPath(id);
    try {
      return { tree: await readTree(dir) };
    } catch (err) {
      return { error: `cannot read ${dir}: ${(err as Error).message}` };
    }
  };
}

export async function committedWorkspace(
  { sessions, requests }: Pick<CheckInput, 'sessions' | 'requests'>,
  committedTree: ReadTree,
): Promise<InvariantResult> {
  const details: string[] = [];
  for (const s of sessions) {
    const mine = requests.filter((r) => r.session === s.id);
    const ok = mine.filter((r) => r.outcome === 'ok').length;
    const unknown = mine.filter((r) => r.outcome === 'unknown').length;
    const committedTurns = s.turns.filter((t) => t.status === 'committed');
    const committed = committedMessageCount(s);
    if (committed < ok || committed > ok + unknown)
      details.push(
        `${s.id}: ${committed} committed messages, but the client saw ${ok} ok (+${unknown} unknown)`,
      );
    const want = expectedEffects(
      s.messages,
      committedTurns.flatMap((t) => t.messageIds),
    );
    const read = await committedTree(s.id);
    const wrong = 'error' in read ? read.error : treeDiff(read.tree, want.tree);
    if (wrong) details.push(`${s.id}: ${wrong} (${committed} messages committed)`);
    if (!isDeepStrictEqual(workloadState(s.state), want.state))
      details.push(`${s.id}: state is ${JSON.stringify(s.state)}, expected ${JSON.stringify(want.state)}`);
  }
  return result(
    'committed-workspace',
    `${sessions.length} sessions: committed trees and state are what their committed messages wrote`,
    details,
  );
}

/**
 * Script-step failures, by the kind of step that failed (the module header says from what).
 * A failed assert of an excused message is listed as excused; no other step is excused (a
 * missing earlier message explains an assert that failed, and nothing else).
 */
export function failedSteps(sessions: SessionSnapshot[], excused: Map<number, string>): InvariantResult[] {
  const partial: string[] = [];
  const partialExcused: string[] = [];
  const stray: string[] = [];
  const other: string[] = [];
  for (const s of sessions) {
    const reported = reportedSteps(s);
    const texts = new Map(s.messages.map((m) => [m.id, m.text]));
    for (const t of s.turns) {
      const failed = reported.get(t.id);
      if (!failed && t.errorCode !== 'STEP_FAILED') continue;
      const line = `${s.id} turn ${t.id} (attempt ${t.attempt}, ${t.status} ${t.errorCode ?? ''}): ${(t.error ?? '').slice(0, 200)}`;
      if (!failed) {
        other.push(`${line} [STEP_FAILED with no step reported]`);
        continue;
      }
      const text = texts.get(failed.messageId);
      const step =
        failed.index === null || text === undefined ? undefined : readPlan(text)?.steps[failed.index];
      const why = excused.get(failed.messageId);
      if (step && ('assertFile' in step || 'assertState' in step)) {
        if (why) partialExcused.push(`${line} [message ${failed.messageId}: ${why}]`);
        else partial.push(line);
      } else if (step && 'run' in step && step.run === STRAY_PROCESS_CHECK) stray.push(line);
      else other.push(`${line} [step ${failed.index} (${failed.kind}) of message ${failed.messageId}]`);
    }
  }
  return [
    result('no-partial-reads', 'no turn saw anything but committed files and state', partial, partialExcused),
    result('no-stray-process', "no turn found a previous turn's background process", stray),
    result('no-failed-steps', 'no other script step failed', other),
  ];
}

function turnsEnded(sessions: SessionSnapshot[]): InvariantResult {
  const details: string[] = [];
  for (const s of sessions) {
    for (const t of s.turns.filter((x) => x.status === 'running'))
      details.push(`${s.id}: turn ${t.id} still running`);
    if (s.view?.pendingLayer) details.push(`${s.id}: layer of turn ${s.view.pendingLayer} never promoted`);
    if (s.view?.leaseOwner) details.push(`${s.id}: still leased by ${s.view.leaseOwner}`);
  }
  return result(
    'turns-ended',
    'after shutdown no turn runs, no lease is held, no layer awaits promotion',
    details,
  );
}

function cleanShutdown(processes: ProcessEnd[]): InvariantResult {
  const details: string[] = [];
  for (const p of processes) {
    if (!p.alive) {
      const how = p.lastExit
        ? `code ${p.lastExit.code}, signal ${p.lastExit.signal}, at ${new Date(p.lastExit.at).toISOString()}`
        : '?';
      details.push(`${p.name} was not running when the workload ended (exited: ${how})`);
    }
    if (p.stop.forced) details.push(`${p.name} ignored SIGTERM and was SIGKILLed`);
    else if (p.alive && p.stop.code !== 0)
      details.push(`${p.name} exited ${p.stop.code ?? p.stop.signal} on SIGTERM`);
  }
  return result(
    'clean-shutdown',
    `${processes.length} berth processes survived the run and stopped cleanly`,
    details,
  );
}
