/** `berth status`: sessions, queue, sandboxes and workers, as a table or JSON. */
import { Command } from 'commander';
import type { Sandbox, Status } from '../client/index.js';
import type { SessionView } from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function statusCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('status')
    .description('Show sessions, the queue, sandboxes and workers')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const status = await (await connect(env)).status();
      if (o.json) return printJson(status);
      process.stdout.write(renderStatus(status));
    });
}

export function renderStatus(s: Status): string {
  const alive = s.workers.filter((w) => w.alive);
  const draining = alive.filter((w) => w.drainingSince !== null);
  const live = s.sandboxes.filter((b) => b.phase !== 'gone').length;
  return [
    renderSessions(s.sessions),
    '',
    renderSandboxes(s.sandboxes),
    '',
    `queue: ${s.queue.length} waiting   sandboxes: ${live} (${s.sandboxes.length - live} ended lately)   workers: ${alive.length} alive (${alive.reduce((n, w) => n + w.slots, 0)} slots)${draining.length > 0 ? `, draining: ${draining.map((w) => w.id).join(' ')}` : ''}`,
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

export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}
