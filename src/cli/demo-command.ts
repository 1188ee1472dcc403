/**
 * `berth demo`: a host with 2 slots takes script jobs for 8 sessions. The screen shows
 * each session live — queue position, attempt, progress — then the replies and a
 * summary of what was measured. Everything goes through the real API and real sandboxes.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { destination, pino } from 'pino';
import { ApiClient, type Posted } from '../client/index.js';
import { loadConfig, type ScriptPlan } from '../core/index.js';
import { startHost } from './host.js';

interface Row {
  session: string;
  state: string;
  detail: string;
  postedAt: number;
  startedAt?: number;
  doneAt?: number;
  maxPosition: number;
  reply?: string;
}

const SESSIONS = 8;
const SLOTS = 2;

export function demoCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('demo')
    .description(
      `Run ${SESSIONS} script sessions through a ${SLOTS}-slot host and show queueing, progress and replies live`,
    )
    .option('--keep', 'keep the demo data directory')
    .action(async (o: { keep?: boolean }) => {
      const dataDir = env.BERTH_DATA ?? (await mkdtemp(join(tmpdir(), 'berth-demo-')));
      const config = loadConfig({ ...env, BERTH_DATA: dataDir }, { apiPort: 0, slots: SLOTS });
      const log = pino({ level: 'warn' }, destination(2));
      const host = await startHost(config, log);
      const client = new ApiClient(host.url, host.adminToken);
      try {
        await client
          .request('POST', '/v1/agents', { name: 'demo', provider: 'script', memoryMb: 256 })
          .catch(() => undefined);
        const rows = await runSessions(client);
        printSummary(rows);
      } finally {
        await host.close();
        if (!o.keep && !env.BERTH_DATA) await rm(dataDir, { recursive: true, force: true });
      }
    });
}

function planFor(n: number): ScriptPlan {
  const ms = 600 + ((n * 370) % 900);
  return {
    steps: [
      { progress: 'reading the task' },
      { sleep: ms },
      { write: { path: 'notes.md', content: `session ${n} was here\n` } },
      { progress: 'computing' },
      { run: `seq 1 ${n * 1000} | tail -n 1 > result.txt` },
      { sleep: ms },
      { progress: 'writing the answer' },
    ],
    reply: `session ${n}: counted to ${n * 1000} in a sandbox of its own`,
  };
}

async function runSessions(client: ApiClient): Promise<Row[]> {
  const rows: Row[] = [];
  const render = createRenderer(rows);
  const waits = [];
  for (let n = 1; n <= SESSIONS; n++) {
    const session = `demo-${n}`;
    const posted = await client.request<Posted>('POST', `/v1/sessions/${session}/messages`, {
      agent: 'demo',
      text: JSON.stringify(planFor(n)),
    });
    const row: Row = {
      session,
      state: 'queued',
      detail: '',
      postedAt: Date.now(),
      maxPosition: posted.session.queuePosition ?? 0,
    };
    rows.push(row);
    waits.push(follow(client, row, posted, render));
  }
  const ticker = setInterval(render, 250);
  await Promise.all(waits);
  clearInterval(ticker);
  render();
  return rows;
}

async function follow(client: ApiClient, row: Row, posted: Posted, render: () => void): Promise<void> {
  for await (const e of client.events(row.session, posted.eventId)) {
    const d = e.data;
    if (e.type === 'queued') {
      row.state = 'queued';
      row.detail = `position ${d.position}`;
      row.maxPosition = Math.max(row.maxPosition, Number(d.position));
    } else if (e.type === 'started') {
      row.state = 'running';
      row.detail = `attempt ${d.attempt}`;
      row.startedAt ??= Date.now();
    } else if (e.type === 'progress') {
      row.detail = String(d.text);
    } else if (e.type === 'retrying') {
      row.state = 'retrying';
      row.detail = String(d.error);
    } else if (e.type === 'failed') {
      row.state = 'failed';
      row.detail = String(d.error);
      row.doneAt = Date.now();
      return render();
    } else if (e.type === 'reply') {
      row.state = 'done';
      row.reply = String(d.text);
      row.detail = '';
      row.doneAt = Date.now();
      return render();
    }
    render();
  }
}

function createRenderer(rows: Row[]): () => void {
  const tty = process.stdout.isTTY;
  let drawn = 0;
  const last = new Map<string, string>();
  return () => {
    const lines = rows.map((r) => `${r.session.padEnd(8)} ${r.state.padEnd(9)} ${r.detail}`);
    if (tty) {
      if (drawn) process.stdout.write(`\x1b[${drawn}A`);
      for (const l of lines) process.stdout.write(`\x1b[K${l}\n`);
      drawn = lines.length;
    } else {
      rows.forEach((r, i) => {
        const key = `${r.state} ${r.detail}`;
        if (last.get(r.session) !== key) {
          last.set(r.session, key);
          process.stdout.write(`${lines[i]}\n`);
        }
      });
    }
  };
}

function printSummary(rows: Row[]): void {
  const first = Math.min(...rows.map((r) => r.postedAt));
  const last = Math.max(...rows.map((r) => r.doneAt ?? Date.now()));
  const waits = rows.map((r) => (r.startedAt ?? r.postedAt) - r.postedAt);
  process.stdout.write('\nReplies:\n');
  for (const r of rows) process.stdout.write(`  ${r.session}: ${r.reply ?? `(${r.state}) ${r.detail}`}\n`);
  const done = rows.filter((r) => r.state === 'done').length;
  process.stdout.write(
    `\nSummary: ${done}/${rows.length} replied, ${SLOTS} slots, wall ${((last - first) / 1000).toFixed(1)} s, ` +
      `queue wait mean ${(waits.reduce((a, b) => a + b, 0) / waits.length / 1000).toFixed(1)} s / max ${(Math.max(...waits) / 1000).toFixed(1)} s, ` +
      `deepest queue position ${Math.max(...rows.map((r) => r.maxPosition))}\n`,
  );
  if (done !== rows.length) process.exitCode = 1;
}
