/**
 * `berth chaos`: runs berth as separate processes (an API and W workers on a temp data
 * dir, on SQLite or PostgreSQL), drives a workload through the API while killing sandboxes
 * (docker kill), workers (SIGKILL) and, on a PostgreSQL cluster of its own, the database
 * (stop, wait, start), or on a Patroni cluster of its own its primary (--kill-store-primary:
 * the postmaster SIGKILLed, or the whole member lost), and cuts one worker's network link
 * for longer than the lease (--partition-worker: each worker in a network namespace); or runs
 * the workers on nodes of their own (--nodes: each its network namespace, Docker engine,
 * disk and worker, sharing a PostgreSQL store and a throw-away S3 service) and kills some
 * whole (--kill-nodes), or SIGKILLs the S3 daemon for a few seconds (--kill-blobs); then
 * checks the invariants and prints the report. Exit 1 when an invariant fails, any request
 * ended fail/unknown or a failover did not recover; 2 for bad flags.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import type {
  ChaosOptions,
  ChaosProgress,
  ChaosReport,
  PatroniCluster,
  PostgresCluster,
  PrimaryDeath,
  S3Service,
} from '../chaos/index.js';
import { BerthError, hostPaths, loadConfig, parseDurationMs } from '../core/index.js';
import { formatElapsed } from './progress.js';

interface ChaosFlags {
  sessions: string;
  turns: string;
  longTurns: string;
  duration: string;
  killEvery: string;
  killWorker?: boolean;
  killWorkers: string;
  workers: string;
  store?: string;
  restartStore?: boolean;
  storeDown: string;
  killStorePrimary?: string | boolean;
  partitionWorker?: boolean;
  nodes?: string;
  killNodes?: string;
  killBlobs?: string | boolean;
  messageTimeout: string;
  slots: string;
  lease: string;
  seed?: string;
  data?: string;
  logLevel: string;
  json?: boolean;
  keep?: boolean;
}

export function chaosCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('chaos')
    .description(
      'Run a fault-injection test against real berth processes: an API (`up --slots 0`) and two workers on a ' +
        'temp data dir, N sessions x T turns of a script workload, docker kills of random sandboxes and one ' +
        'SIGKILL of a worker; then check that no message was lost or duplicated, no turn saw partial state ' +
        'and nothing was left behind',
    )
    .option('--sessions <n>', 'concurrent sessions', '10')
    .option('--turns <n>', 'turns (messages) per session, sent in bursts of 2 to 5 while a turn runs', '5')
    .option(
      '--long-turns <n>',
      "more sessions of one long model turn each: berth's anthropic loop against a scripted model the run starts, 20 tool calls (each appends a line to steps.txt) then a reply; the verdict counts the model calls each fault made them redo (at most 1). Not with --nodes or --partition-worker",
      '0',
    )
    .option('--duration <seconds>', 'stop the workload after this many seconds even if unfinished', '600')
    .option(
      '--kill-every <a-b>',
      'docker kill a running sandbox every A to B seconds (uniform); every other one a sandbox running a turn, the rest at random',
      '1-3',
    )
    .option('--kill-worker', 'SIGKILL one worker at about 1/3 of the run and restart it 1 s later (default)')
    .option('--no-kill-worker', 'do not kill a worker')
    .option('--kill-workers <n|p%>', 'workers SIGKILLed at once: a count, or a share like 30%', '1')
    .option('--workers <n>', 'worker processes', '2')
    .option(
      '--store <url|postgres|patroni>',
      'store of the run: a postgres:// URL (an empty database), "postgres" for a throw-away cluster the run starts and removes, or "patroni" for a throw-away replicated one (etcd and two Patroni members, synchronous; root) (default: SQLite in the data dir)',
    )
    .option('--restart-store', 'restart the database halfway through the run (needs --store postgres)')
    .option('--store-down <seconds>', 'how long the restarted database stays down', '3')
    .option(
      '--kill-store-primary [how]',
      'kill the primary halfway through the run (needs --store patroni): "postmaster" (default) SIGKILLs its postmaster, "member" loses its machine (link cut, Patroni and PostgreSQL SIGKILLed, started again after the failover); a list like postmaster,member kills it once per entry, spread over the run',
    )
    .option(
      '--partition-worker',
      'run each worker in a network namespace of its own and cut one off the network (veth down) for two leases, a quarter into the run (needs --store, root and iproute2)',
    )
    .option(
      '--nodes <n>',
      'run the workers on N nodes, each its own network namespace, Docker engine (the base image copied in), disk and worker, sharing only the PostgreSQL store (default --store postgres) and a throw-away S3 service (radosgw); root, iproute2, Ceph and a cgroup v1 freezer',
    )
    .option(
      '--kill-nodes <n|p%>',
      'nodes killed at once about a third into the run, those running the most turns (needs --nodes): worker, engine and containers SIGKILLed, mounts dropped, disk deleted; each comes back empty 5 s later',
    )
    .option(
      '--kill-blobs [seconds]',
      'SIGKILL the S3 daemon halfway through the run (with --long-turns: as the first long turn is a quarter done, amid its checkpoint uploads) and start it again after this many seconds (default 5); the run keeps its blobs in a throw-away S3 service (radosgw)',
    )
    .option('--slots <n>', 'slots of each worker', '2')
    .option(
      '--message-timeout <seconds>',
      'berth silent about a message this long (no answer to the POST, no event while its reply is awaited): the request is unknown',
      '120',
    )
    .option('--lease <duration>', 'worker lease (BERTH_LEASE) of the children', '3s')
    .option('--seed <n>', 'seed of the workload sleeps (default random; printed in the report)')
    .option('--data <dir>', 'use this data dir (kept) instead of a temp one')
    .option(
      '--log-level <level>',
      'log level of the berth children (logs in the data dir; see --keep)',
      'warn',
    )
    .option('--json', 'print the report as JSON')
    .option(
      '--keep',
      'keep the temp data dir: store, workspaces, and the children logs (api.log, worker-N.log)',
    )
    .addHelpText(
      'after',
      `
Every request ends ok (reply), fail (berth failed it after its tries) or unknown
(timeout or stream error). Exit code: 0 when every invariant holds and every request
was ok; 1 otherwise; 2 for bad flags. Needs Docker and root (overlay mounts).

Examples:
  berth chaos                                  10 x 5 turns, kills every 1-3 s, one worker kill
  berth chaos --sessions 20 --turns 10 --kill-every 0.5-2 --keep
  berth chaos --no-kill-worker --json > report.json
  berth chaos --sessions 6 --turns 3 --long-turns 2   long model turns among the script sessions
  berth chaos --store postgres --workers 6 --sessions 500 --turns 2 --kill-workers 30% --restart-store --partition-worker
  berth chaos --store patroni --kill-store-primary postmaster,member --sessions 50 --turns 4
  berth chaos --nodes 4 --kill-nodes 30% --kill-blobs --sessions 200 --turns 3 --slots 3`,
    )
    .action(async (flags: ChaosFlags) => {
      // Loaded here, not at the top: every other command starts without the chaos suite's modules.
      const {
        renderReport,
        requireNetworkNamespaces,
        requirePatroni,
        runChaos,
        startPatroniCluster,
        startPostgresCluster,
        startS3Service,
      } = await import('../chaos/index.js');
      const nodes = flags.nodes === undefined ? null : positiveInt('--nodes', flags.nodes);
      const longTurns = nonNegativeInt('--long-turns', flags.longTurns);
      if (longTurns > 0 && (nodes !== null || flags.partitionWorker))
        throw badFlag(
          '--long-turns',
          flags.longTurns,
          'possible with --nodes or --partition-worker (their workers do not reach the scripted model on this host); leave one out',
        );
      const workers = nodes ?? positiveInt('--workers', flags.workers);
      if (flags.killNodes !== undefined && nodes === null)
        throw badFlag('--kill-nodes', flags.killNodes, 'possible without --nodes');
      const storeFlag = flags.store ?? (nodes === null ? undefined : 'postgres');
      const blobsDownMs =
        typeof flags.killBlobs === 'string'
          ? positiveNumber('--kill-blobs', flags.killBlobs) * 1000
          : flags.killBlobs
            ? 5000
            : null;
      if (flags.restartStore && storeFlag !== 'postgres')
        throw badFlag(
          '--restart-store',
          'on',
          'possible without --store postgres (a cluster the run starts itself)',
        );
      const deaths = primaryDeaths(flags.killStorePrimary);
      if (deaths.length > 0) {
        if (storeFlag !== 'patroni')
          throw badFlag(
            '--kill-store-primary',
            'on',
            'possible without --store patroni (a replicated cluster the run starts itself)',
          );
      }
      if (storeFlag === 'patroni')
        await requirePatroni().catch((err: unknown) => {
          throw new BerthError('INVALID_INPUT', `--store patroni: ${(err as Error).message}`, {
            hint: 'Run as root with Patroni and etcd installed (bash scripts/ensure-patroni.sh), or use --store postgres.',
          });
        });
      if (flags.partitionWorker) {
        if (storeFlag === undefined)
          throw badFlag(
            '--partition-worker',
            'on',
            'possible without --store (it cuts a worker off its PostgreSQL store)',
          );
        await requireNetworkNamespaces().catch((err: unknown) => {
          throw new BerthError('INVALID_INPUT', `--partition-worker: ${(err as Error).message}`, {
            hint: 'Run as root on a machine with iproute2, or leave out --partition-worker.',
          });
        });
      }
      const storeDownMs = positiveNumber('--store-down', flags.storeDown) * 1000;
      const options = {
        sessions: positiveInt('--sessions', flags.sessions),
        turns: positiveInt('--turns', flags.turns),
        longTurns,
        durationCapMs: positiveInt('--duration', flags.duration) * 1000,
        killEveryMs: killInterval(flags.killEvery),
        // On nodes a node dies whole instead: no worker is killed alone unless asked.
        killWorkers:
          flags.killWorker === false || (nodes !== null && flags.killWorker !== true)
            ? 0
            : workerCount('--kill-workers', flags.killWorkers, workers),
        workers,
        slotsPerWorker: positiveInt('--slots', flags.slots),
        messageTimeoutMs: positiveNumber('--message-timeout', flags.messageTimeout) * 1000,
        lease: lease(flags.lease),
        seed: flags.seed === undefined ? undefined : nonNegativeInt('--seed', flags.seed),
        dataDir: flags.data,
        logLevel: flags.logLevel,
        keep: flags.keep,
        partitionWorker: flags.partitionWorker ? {} : undefined,
        env,
      };
      const live = liveProgress(process.stderr);
      // First Ctrl-C: stop the workload, then shut down, check and clean up as usual. A second one kills.
      const interrupt = new AbortController();
      const onSignal = () => {
        process.stderr.write(
          '\nberth chaos: stopping the workload; shutting down and checking (Ctrl-C again to kill)\n',
        );
        interrupt.abort();
      };
      process.once('SIGINT', onSignal);
      process.once('SIGTERM', onSignal);
      let cluster: PostgresCluster | PatroniCluster | null = null;
      let s3: S3Service | null = null;
      try {
        if (nodes !== null || blobsDownMs !== null) {
          s3 = await startS3Service();
          await s3.createBucket('berth-chaos');
        }
        let store: ChaosOptions['store'];
        if (storeFlag === 'patroni') {
          const replicated = await startPatroniCluster();
          cluster = replicated;
          const database = 'berth_chaos';
          store = {
            url: await replicated.createDatabase(database),
            failover: deaths.length > 0 ? { cluster: replicated, database, deaths } : undefined,
          };
        } else if (storeFlag === 'postgres') {
          cluster = await startPostgresCluster();
          const c = cluster;
          store = {
            url: await c.createDatabase('berth_chaos'),
            restart: flags.restartStore
              ? { stop: () => c.stop(), start: () => c.start(), downMs: storeDownMs }
              : undefined,
          };
        } else if (storeFlag !== undefined) store = { url: storeFlag };
        const report = await runChaos({
          ...options,
          store,
          blobs: s3 ? { service: s3, bucket: 'berth-chaos', killForMs: blobsDownMs ?? undefined } : undefined,
          nodes:
            nodes === null
              ? undefined
              : {
                  count: nodes,
                  kill:
                    flags.killNodes === undefined ? 0 : workerCount('--kill-nodes', flags.killNodes, nodes),
                },
          onProgress: live.update,
          signal: interrupt.signal,
        });
        live.finish();
        process.stdout.write(flags.json ? `${JSON.stringify(report, null, 2)}\n` : renderReport(report));
        const saved = await saveChaosReport(loadConfig(env).dataDir, report);
        process.stderr.write(`berth chaos: report saved to ${saved} (the dashboard's fault timeline)\n`);
        if (!report.passed) process.exitCode = 1;
      } finally {
        process.off('SIGINT', onSignal);
        process.off('SIGTERM', onSignal);
        live.finish();
        await cluster?.remove();
        await s3?.remove();
      }
    });
}

function positiveInt(flag: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1) throw badFlag(flag, raw, 'a whole number >= 1');
  return n;
}

function nonNegativeInt(flag: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) throw badFlag(flag, raw, 'a whole number >= 0');
  return n;
}

function positiveNumber(flag: string, raw: string): number {
  const n = Number(raw);
  if (!(n > 0)) throw badFlag(flag, raw, 'a number > 0');
  return n;
}

/** --kill-store-primary: absent = none; bare = the postmaster; else a comma list of postmaster|member. */
function primaryDeaths(raw: string | boolean | undefined): PrimaryDeath[] {
  if (raw === undefined || raw === false) return [];
  if (raw === true) return ['postmaster'];
  const deaths = raw.split(',').map((x) => x.trim());
  if (deaths.length === 0 || deaths.some((d) => d !== 'postmaster' && d !== 'member'))
    throw badFlag(
      '--kill-store-primary',
      raw,
      '"postmaster", "member", or a list of them like postmaster,member',
    );
  return deaths as PrimaryDeath[];
}

/** "3" workers (or nodes), or "30%" of them (rounded up), at most all of them. */
function workerCount(flag: string, raw: string, of: number): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(%?)\s*$/.exec(raw);
  const n = !m ? Number.NaN : m[2] ? Math.ceil((Number(m[1]) / 100) * of) : Number(m[1]);
  const what = flag === '--kill-nodes' ? '--nodes' : '--workers';
  if (!(Number.isInteger(n) && n >= 1 && n <= of))
    throw badFlag(flag, raw, `a count from 1 to ${of} (${what}), or a share like 30%`);
  return n;
}

/** "A-B" seconds (decimals allowed), or one number for a fixed interval. */
function killInterval(raw: string): { min: number; max: number } {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*$/.exec(raw);
  const min = m ? Number(m[1]) * 1000 : Number.NaN;
  const max = m ? Number(m[2] ?? m[1]) * 1000 : Number.NaN;
  if (!(min >= 100 && max >= min))
    throw badFlag('--kill-every', raw, 'seconds "A-B" with 0.1 <= A <= B, e.g. 1-3');
  return { min, max };
}

function lease(raw: string): string {
  const ms = parseDurationMs(raw);
  if (ms === undefined || ms < 500) throw badFlag('--lease', raw, 'a duration of at least 500ms, e.g. 3s');
  return raw;
}

function badFlag(flag: string, raw: string, want: string): BerthError {
  return new BerthError('INVALID_INPUT', `${flag} ${JSON.stringify(raw)} is not ${want}`, {
    hint: 'Run berth chaos --help for the flag formats.',
  });
}

/** One progress line on stderr, redrawn at most every 0.5 s on a TTY; off a TTY a line every 5 s at most. */
function liveProgress(stream: NodeJS.WriteStream): { update(p: ChaosProgress): void; finish(): void } {
  const tty = stream.isTTY === true;
  let latest: ChaosProgress | null = null;
  let drawn = '';
  let lastPlainAt = 0;
  let finished = false;
  const line = (p: ChaosProgress) =>
    `chaos ${p.phase}: turns ${p.turnsDone}/${p.turnsTotal} (ok ${p.ok}, fail ${p.fail}, unknown ${p.unknown}), ` +
    `faults: ${p.sandboxKills} sandbox kills, ${p.workerKills} worker kills, ${p.storeRestarts} store restarts, ` +
    `${p.storeFailovers} store failovers, ${p.nodeKills} node kills, ${p.blobsKills} S3 kills, ` +
    `${p.partitions} partitions, ${formatElapsed(p.elapsedMs)}`;
  const draw = () => {
    if (!latest || finished) return;
    const text = line(latest);
    if (tty) {
      if (text !== drawn) stream.write(`\r${text.slice(0, (stream.columns ?? 120) - 1)}\x1b[K`);
    } else if (text !== drawn && Date.now() - lastPlainAt >= 5000) {
      stream.write(`${text}\n`);
      lastPlainAt = Date.now();
    } else return;
    drawn = text;
  };
  const timer = setInterval(draw, 500);
  timer.unref();
  return {
    update(p) {
      latest = p;
    },
    finish() {
      if (finished) return;
      finished = true;
      clearInterval(timer);
      if (tty && drawn) stream.write('\r\x1b[K');
    },
  };
}

/** Into <data>/chaos/, where the host's dashboard (GET /v1/chaos/reports) finds it. */
async function saveChaosReport(dataDir: string, report: ChaosReport): Promise<string> {
  const startedAt = Date.now() - report.wallMs;
  const dir = hostPaths(dataDir).chaosReportsDir;
  await mkdir(dir, { recursive: true });
  const file = join(dir, `${new Date(startedAt).toISOString().replace(/[:.]/g, '-')}.json`);
  await writeFile(file, JSON.stringify({ startedAt, ...report }));
  return file;
}
