/**
 * `berth demo`: 20 concurrent tasks of about a minute each (multi-step `script` turns that
 * report progress) on an embedded 4-slot host, while sandboxes are killed (every other one running a task; docker
 * kill through the Engine API, the chaos suite's FaultInjector). A live view shows every
 * task's state, queue position, attempt and progress; the summary says whether all 20
 * completed with none lost, the queue waits and run times, the faults and the recoveries,
 * and the dashboard URL to watch it. `--fast` (make demo DEMO_FAST=1) runs the same in
 * well under a minute. Everything goes through the real API (the SDK) and real sandboxes.
 * Exit 0 only when every task completed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command } from 'commander';
import { destination, pino } from 'pino';
import type { FaultInjector } from '../chaos/index.js';
import { Berth, type Posted } from '../client/index.js';
import { installIdOf, loadConfig, type ScriptPlan } from '../core/index.js';
import { createProgress, formatElapsed } from './progress.js';

const TASKS = 20;
const SLOTS = 4;
const STEPS = 6;

interface Pace {
  stepMs: number;
  killEveryMs: { min: number; max: number };
  /**
   * Sandbox kills in all. A budget, not a rate to the end: the kills always pick a running
   * sandbox, so once few tasks are left a steady rate would hit the same ones again and again.
   */
  kills: number;
  retryBaseMs: number;
}

const FULL: Pace = {
  stepMs: 10_000,
  killEveryMs: { min: 15_000, max: 30_000 },
  kills: 8,
  retryBaseMs: 1_000,
};
const FAST: Pace = { stepMs: 300, killEveryMs: { min: 2_500, max: 4_000 }, kills: 6, retryBaseMs: 200 };

interface Row {
  session: string;
  state: 'queued' | 'running' | 'retrying' | 'done' | 'failed';
  position: number | null;
  attempt: number;
  step: number;
  postedAt: number;
  startedAt?: number;
  lastStartedAt?: number;
  doneAt?: number;
  retries: number;
  /** Time from a retry to the reply that followed it. */
  recoveredInMs?: number;
  retryingSince?: number;
}

export function demoCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('demo')
    .description(
      `Run ${TASKS} one-minute tasks on a ${SLOTS}-slot host while sandboxes are killed; show them live and summarise`,
    )
    .option('--fast', 'shortened run (under a minute), as CI runs it')
    .option('--keep', 'keep the demo data directory')
    .action(async (o: { fast?: boolean; keep?: boolean }) => {
      const pace = o.fast ? FAST : FULL;
      const dataDir = env.BERTH_DATA ?? (await mkdtemp(join(tmpdir(), 'berth-demo-')));
      // Kills cost tries: leave enough of them that a task hit several times still completes.
      const config = loadConfig(
        { ...env, BERTH_DATA: dataDir },
        { apiPort: 0, slots: SLOTS, maxTries: 10, retryBaseMs: pace.retryBaseMs, idleTimeoutMs: 0 },
      );
      // The host's log goes to a file: warnings the faults cause (a warm sandbox killed in the pool) would tear the live table.
      const logFile = join(tmpdir(), `berth-demo-${process.pid}.log`);
      const log = pino({ level: 'info' }, destination({ dest: logFile, sync: true }));
      // Loaded here, not at the top: every other command starts without the host's modules.
      const [{ startHost }, { FaultInjector, runningTurnsIn }] = await Promise.all([
        import('../host/index.js'),
        import('../chaos/index.js'),
      ]);
      const host = await startHost(config, log, {
        buildReporter: createProgress('Building sandbox base image'),
      });
      const berth = new Berth({ url: host.url, token: host.adminToken });
      const injector = new FaultInjector({
        engines: () => [{ docker: host.docker, installId: installIdOf(dataDir) }],
        killEveryMs: pace.killEveryMs,
        maxDurationMs: 60 * 60_000,
        // Every other kill aims at a sandbox running a task: random ones often find a warm or idle one.
        runningTurns: runningTurnsIn(host.store, config.maxTries),
      });
      const cleanUp = async () => {
        await injector.stop();
        await host.close();
        if (!o.keep && !env.BERTH_DATA) await rm(dataDir, { recursive: true, force: true });
      };
      // Ctrl-C: end the sandboxes, unmount and remove the temp data dir, as at the normal end.
      const onSignal = () => {
        process.stderr.write('\nberth demo: stopping; cleaning up\n');
        void cleanUp().finally(() => process.exit(130));
      };
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      try {
        process.stdout.write(`dashboard: ${host.url}/#token=${host.adminToken}\n\n`);
        await berth.agents.create({ name: 'demo', provider: 'script', memoryMb: 256 }).catch(() => undefined);
        const startedAt = Date.now();
        injector.start();
        const budget = setInterval(() => {
          if (injector.count('sandbox-kill') >= pace.kills) void injector.stop();
        }, 100);
        const rows = await runTasks(berth, pace).finally(() => clearInterval(budget));
        await injector.stop();
        const ok = printSummary(
          rows,
          await storedOutcomes(berth, rows, injector),
          injector,
          Date.now() - startedAt,
        );
        process.stdout.write(`\ndashboard: ${host.url}/#token=${host.adminToken} (until the demo exits)\n`);
        if (!ok) {
          process.exitCode = 1;
          process.stdout.write(`host log: ${logFile}\n`);
        } else await rm(logFile, { force: true });
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        await cleanUp();
      }
    });
}

function planFor(n: number, pace: Pace): ScriptPlan {
  const steps: ScriptPlan['steps'] = [];
  for (let k = 1; k <= STEPS; k++) {
    steps.push({ progress: `step ${k}/${STEPS}` });
    steps.push({ sleep: pace.stepMs });
    if (k === STEPS / 2) steps.push({ run: `seq 1 ${n * 1000} | tail -n 1 > count.txt` });
  }
  steps.push({ write: { path: 'result.md', content: `task ${n} done\n` } });
  return { steps, reply: `task ${n}: counted to ${n * 1000} in ${STEPS} steps` };
}

async function runTasks(berth: Berth, pace: Pace): Promise<Row[]> {
  const rows: Row[] = [];
  const render = createRenderer(rows);
  const follows: Promise<void>[] = [];
  for (let n = 1; n <= TASKS; n++) {
    const session = `task-${String(n).padStart(2, '0')}`;
    const posted = await berth.sessions.post(session, {
      agent: 'demo',
      text: JSON.stringify(planFor(n, pace)),
    });
    const row: Row = {
      session,
      state: 'queued',
      position: posted.session.queuePosition,
      attempt: 0,
      step: 0,
      postedAt: Date.now(),
      retries: 0,
    };
    rows.push(row);
    follows.push(follow(berth, row, posted));
  }
  const ticker = setInterval(render, 250);
  await Promise.all(follows);
  clearInterval(ticker);
  render();
  return rows;
}

async function follow(berth: Berth, row: Row, posted: Posted): Promise<void> {
  try {
    await berth.waitForReply(row.session, posted, {
      onEvent: (e) => {
        const d = e.data;
        const now = Date.now();
        switch (e.type) {
          case 'queued':
            row.position = (d.position as number | null) ?? row.position;
            break;
          case 'started':
            row.state = 'running';
            row.position = null;
            row.attempt = Number(d.attempt);
            row.step = 0;
            row.startedAt ??= now;
            row.lastStartedAt = now;
            break;
          case 'progress':
            row.step = Number(/step (\d+)/.exec(String(d.text))?.[1] ?? row.step);
            break;
          case 'retrying':
            row.state = 'retrying';
            row.retries++;
            row.retryingSince ??= now;
            break;
        }
      },
    });
    row.state = 'done';
    row.doneAt = Date.now();
    if (row.retryingSince !== undefined) row.recoveredInMs = row.doneAt - row.retryingSince;
  } catch {
    row.state = 'failed';
    row.doneAt = Date.now();
  }
}

function bar(step: number): string {
  return `[${'#'.repeat(step)}${'-'.repeat(STEPS - step)}]`;
}

function createRenderer(rows: Row[]): () => void {
  const tty = process.stdout.isTTY;
  let drawn = 0;
  const last = new Map<string, string>();
  return () => {
    const now = Date.now();
    const lines = rows.map((r) => {
      const where = r.state === 'queued' && r.position !== null ? `queue #${r.position}` : '';
      const attempt = r.attempt > 1 ? `attempt ${r.attempt}` : '';
      const clock = formatElapsed((r.doneAt ?? now) - r.postedAt);
      return `${r.session}  ${r.state.padEnd(8)} ${bar(r.step)} ${where.padEnd(9)} ${attempt.padEnd(9)} ${clock}`;
    });
    const done = rows.filter((r) => r.state === 'done').length;
    const header = `${done}/${rows.length} done, ${rows.filter((r) => r.state === 'running').length} running, ${rows.filter((r) => r.state === 'queued').length} queued`;
    if (tty) {
      if (drawn) process.stdout.write(`\x1b[${drawn}A`);
      for (const l of [header, ...lines]) process.stdout.write(`\x1b[K${l}\n`);
      drawn = lines.length + 1;
      return;
    }
    // Off a TTY (CI logs): a line per state change only.
    rows.forEach((r, i) => {
      const key = `${r.state} ${r.attempt}`;
      if (last.get(r.session) !== key) {
        last.set(r.session, key);
        process.stdout.write(`${lines[i]}\n`);
      }
    });
  };
}

/**
 * From the store, not the client's view: tasks with exactly one reply (answered) or none
 * (lost), replies beyond one (duplicated), and the tasks a kill hit: an aborted turn of theirs
 * ran in a sandbox the injector killed, while it killed it (a retry for any other reason is
 * not a kill's hit).
 */
async function storedOutcomes(berth: Berth, rows: Row[], injector: FaultInjector): Promise<StoredOutcomes> {
  const outcome: StoredOutcomes = { answered: 0, lost: 0, duplicated: 0, hitByKill: new Set() };
  const turns = (await Promise.all(rows.map((r) => berth.sessions.turns(r.session)))).flat();
  const { sandboxKillHits } = await import('../chaos/index.js');
  for (const kill of injector.faults.filter((f) => f.kind === 'sandbox-kill'))
    for (const t of sandboxKillHits(kill, turns)) outcome.hitByKill.add(t.sessionId);
  for (const r of rows) {
    const { messages } = await berth.sessions.messages(r.session);
    const replies = messages.filter((m) => m.direction === 'out').length;
    if (replies === 0) outcome.lost++;
    else outcome.answered++;
    outcome.duplicated += Math.max(0, replies - 1);
  }
  return outcome;
}

interface StoredOutcomes {
  answered: number;
  lost: number;
  duplicated: number;
  /** Sessions of the tasks a kill hit. */
  hitByKill: Set<string>;
}

function secs(ms: number[]): string {
  if (ms.length === 0) return '-';
  const mean = ms.reduce((a, b) => a + b, 0) / ms.length;
  return `mean ${(mean / 1000).toFixed(1)} s, max ${(Math.max(...ms) / 1000).toFixed(1)} s`;
}

/** Prints the summary; true when every task completed. */
function printSummary(rows: Row[], stored: StoredOutcomes, injector: FaultInjector, wallMs: number): boolean {
  const done = rows.filter((r) => r.state === 'done');
  const failed = rows.filter((r) => r.state === 'failed');
  const waits = rows.filter((r) => r.startedAt).map((r) => r.startedAt! - r.postedAt);
  const runs = done.map((r) => r.doneAt! - r.lastStartedAt!);
  const recovered = rows.filter(
    (r) => stored.hitByKill.has(r.session) && r.recoveredInMs !== undefined && r.state === 'done',
  );
  const kills = injector.count('sandbox-kill');
  process.stdout.write(
    [
      '',
      `Summary: ${done.length}/${rows.length} completed, ${failed.length} failed; in the store ${stored.answered} answered, ${stored.lost} lost, ${stored.duplicated} duplicated; ${SLOTS} slots, ${(wallMs / 1000).toFixed(1)} s`,
      `  queue wait   ${secs(waits)}`,
      `  run time     ${secs(runs)} (last attempt)`,
      `  faults       ${kills} sandboxes killed (${injector.skipped} kill attempts found none running)`,
      `  recoveries   ${recovered.length} tasks hit by a kill completed anyway (${rows.reduce((n, r) => n + r.retries, 0)} retries), recovery ${secs(recovered.map((r) => r.recoveredInMs!))}`,
      '',
    ].join('\n'),
  );
  return done.length === rows.length && stored.lost === 0 && stored.duplicated === 0;
}
