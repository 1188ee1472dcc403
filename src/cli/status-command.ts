/**
 * `berth status`: the counts of sessions, the queue, sandboxes and workers, and the first
 * page of sessions (`berth session list` pages through them all), as a table or JSON.
 */
import { Command } from 'commander';
import type { Sandbox, Status } from '../client/index.js';
import { oneLine, type SessionView } from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function statusCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('status')
    .description('Show sessions, the queue, sandboxes and workers')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const berth = await connect(env);
      const [status, first] = await Promise.all([
        berth.status(),
        berth.sessions.page({ limit: STATUS_SESSIONS }),
      ]);
      if (o.json) return printJson({ ...status, sessions: first.sessions });
      process.stdout.write(renderStatus(status, first.sessions));
    });
}

/** Sessions shown under the counts; the rest are a `berth session list` away. */
const STATUS_SESSIONS = 50;

export function renderStatus(s: Status, sessions: SessionView[]): string {
  const alive = s.workers.filter((w) => w.alive);
  const draining = alive.filter((w) => w.drainingSince !== null);
  const live = s.sandboxes.filter((b) => b.phase !== 'gone').length;
  const c = s.counts;
  const more =
    c.sessions > sessions.length ? ` (the first ${sessions.length}: berth session list for all)` : '';
  return [
    renderSessions(sessions),
    '',
    renderSandboxes(s.sandboxes),
    '',
    `sessions: ${c.sessions}${more}, ${c.runningTurns} running, ${c.waiting} waiting, ${c.held} held, ${c.archived} archived   messages: ${c.messages.pending} pending, ${c.messages.failed} failed`,
    `queue: ${s.queueDepth} waiting   sandboxes: ${live} (${s.sandboxes.length - live} ended lately)   workers: ${alive.length} alive (${alive.reduce((n, w) => n + w.slots, 0)} slots)${draining.length > 0 ? `, draining: ${draining.map((w) => w.id).join(' ')}` : ''}`,
    '',
  ].join('\n');
}

/** Each sandbox's phase and what it serves; an ended one says why. */
export function renderSandboxes(sandboxes: Sandbox[]): string {
  const rows = sandboxes.map((b) => [
    b.name,
    b.phase,
    b.sessionId ? `${b.sessionId} g${b.generation}` : b.pooled ? '(warm)' : '-',
    b.workerId,
    b.endReason ? `${b.endReason}: ${oneLine(b.endMessage ?? '', 50)}` : (b.turnId ?? '-'),
  ]);
  return table(['SANDBOX', 'PHASE', 'SESSION', 'WORKER', 'TURN / ENDED'], rows);
}

export function renderSessions(sessions: SessionView[]): string {
  const rows = sessions.map((v) => [
    v.id,
    v.agent,
    v.status,
    v.heldBy ? `behind #${v.heldBy.messageId}` : v.queuePosition === null ? '-' : String(v.queuePosition),
    String(v.pending),
    String(v.generation),
    v.sandbox ?? '-',
    v.lastReply ? oneLine(v.lastReply.text, 40) : '-',
  ]);
  return table(['SESSION', 'AGENT', 'STATUS', 'QUEUE', 'PENDING', 'GEN', 'SANDBOX', 'LAST REPLY'], rows);
}

export function table(head: string[], rows: string[][]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}
