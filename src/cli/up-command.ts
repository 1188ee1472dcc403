/** `berth up` (worker + API) and `berth worker` (a worker alone): run in the foreground until SIGINT/SIGTERM. */
import { Command } from 'commander';
import { destination, pino } from 'pino';
import { loadConfig } from '../core/index.js';
import type { Host } from '../host/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';
import { createProgress } from './progress.js';

interface HostFlags {
  data?: string;
  store?: string;
  blobs?: string;
  host?: string;
  port?: string;
  slots?: string;
  runtime?: string;
  cacheBytes?: string;
  controlListen?: string;
}

const BLOBS_HELP =
  's3://bucket/prefix blob store shared with workers on other machines (AWS_ENDPOINT_URL_S3, AWS_ACCESS_KEY_ID, …), or file:///dir (default: <data>/blobs)';

const CONTROL_HELP =
  "where this worker's control endpoint listens, the API's door to its live sandboxes (default 127.0.0.1:0; the machine's address with workers on several)";
const CACHE_HELP =
  "byte budget of the workspace copies on the data dir; least recently used idle ones are evicted (default: half the data dir's file system; 0 = none)";

export function upCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('up')
    .description('Run a berth host: worker slots and the HTTP API (data in ./.berth, or BERTH_DATA)')
    .option('--data <dir>', 'data directory (store, workspaces, sockets)')
    .option(
      '--store <url>',
      'postgres://… store shared with workers on other machines (default: SQLite in the data dir)',
    )
    .option('--blobs <url>', BLOBS_HELP)
    .option('--host <addr>', 'address to listen on')
    .option('--port <port>', 'API port (default 7420)')
    .option(
      '--slots <n>',
      'concurrent sessions (default from CPUs and memory; 0 = API only, with `berth worker`s)',
    )
    .option(
      '--runtime <docker|kubernetes>',
      'where sandboxes run (default docker; kubernetes: docs/kubernetes.md)',
    )
    .option('--cache-bytes <n>', CACHE_HELP)
    .option('--control-listen <host:port>', CONTROL_HELP)
    .action((flags: HostFlags) => serveInForeground(env, flags, true));
}

export function workerCommand(env: NodeJS.ProcessEnv): Command {
  const worker = new Command('worker')
    .description(
      'Run a worker alone (no API) that shares the store of a host: more slots, or a second worker to fail over to',
    )
    .option('--data <dir>', 'data directory of the host whose store this worker shares')
    .option('--store <url>', 'postgres://… store of the host (default: SQLite in the data dir)')
    .option('--blobs <url>', BLOBS_HELP)
    .option('--slots <n>', 'concurrent sessions (default from CPUs and memory)')
    .option(
      '--runtime <docker|kubernetes>',
      'where sandboxes run (default docker; kubernetes: docs/kubernetes.md)',
    )
    .option('--cache-bytes <n>', CACHE_HELP)
    .option('--control-listen <host:port>', CONTROL_HELP)
    .action((flags: HostFlags) => serveInForeground(env, flags, false));
  worker
    .command('drain <id>')
    .description(
      'Drain a running worker (needs the admin token), as its SIGTERM does: it claims nothing more, lets running turns finish within its BERTH_DRAIN_GRACE, hands back what still runs (no try spent), then stops. Worker ids: berth status --json',
    )
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const drained = await (await connect(env)).drainWorker(id);
      if (o.json) return printJson(drained);
      process.stdout.write(
        `worker ${id} draining: it takes no new session and stops once its turns are done\n`,
      );
    });
  return worker;
}

async function serveInForeground(env: NodeJS.ProcessEnv, flags: HostFlags, api: boolean): Promise<void> {
  const config = loadConfig(env, {
    dataDir: flags.data,
    store: flags.store,
    blobs: flags.blobs,
    apiHost: flags.host,
    apiPort: flags.port,
    slots: flags.slots,
    runtime: flags.runtime,
    cacheBytes: flags.cacheBytes,
    controlListen: flags.controlListen,
  });
  const log = pino({ level: config.logLevel }, destination(2));
  // Listening before the start: a stop asked for while the host starts (its mounts, its
  // reaping) waits for the start, then closes it, rather than killing it half-started; a
  // second one quits at once (an image build can take minutes).
  // The first stop once started drains the worker (its running turns may end by themselves
  // for drainGraceMs); a second one stops at once, handing running turns back.
  let host: Host | null = null;
  let stopAsked: string | null = null;
  let phase: 'serving' | 'draining' | 'closing' = 'serving';
  const close = (h: NonNullable<typeof host>) => {
    phase = 'closing';
    h.close().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'Shutdown failed');
        process.exit(1);
      },
    );
  };
  const shutdown = (signal: string) => {
    if (!host && stopAsked) process.exit(1);
    if (!host)
      process.stderr.write(`berth: ${signal} while starting: stopping once started (again to quit now)\n`);
    stopAsked ??= signal;
    if (!host || phase === 'closing') return;
    if (phase === 'draining') {
      process.stderr.write(
        `berth: ${signal} while draining: stopping now; running turns go back to the queue\n`,
      );
      close(host);
      return;
    }
    phase = 'draining';
    const h = host;
    const graceS = h.config.drainGraceMs / 1000;
    log.info({ signal }, 'Shutting down');
    const again = signal.startsWith('SIG') ? `; ${signal} again to stop now` : '';
    process.stderr.write(
      `berth: ${signal}: draining: claiming nothing more, running turns may finish for up to ${graceS} s (BERTH_DRAIN_GRACE)${again}\n`,
    );
    h.worker.drain(h.config.drainGraceMs).then(
      () => phase === 'draining' && close(h),
      (err: unknown) => {
        log.error({ err }, 'Drain failed');
        if (phase === 'draining') close(h);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  // Loaded here, not at the top: every other command starts without the server's modules.
  const { startHost } = await import('../host/index.js');
  host = await startHost(config, log, {
    api,
    buildReporter: createProgress('Building sandbox base image'),
  });
  void host.worker.drainRequested.then(() => shutdown('drain request'));
  const what = api ? `host up at ${host.url}` : `worker ${host.worker.id} up`;
  process.stderr.write(`berth: ${what} (slots ${config.slots}, data ${config.dataDir}); Ctrl-C stops it\n`);
  // The fragment never reaches the server; the page keeps the token in its session storage.
  if (api) process.stderr.write(`berth: dashboard ${host.url}/#token=${host.adminToken}\n`);
  if (stopAsked) shutdown(stopAsked);
}
