/** `berth up`: run a host (worker + API) in the foreground until SIGINT/SIGTERM. */
import { Command } from 'commander';
import { destination, pino } from 'pino';
import { loadConfig } from '../core/index.js';
import { startHost } from './host.js';

export function upCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('up')
    .description('Run a berth host: worker slots and the HTTP API (data in ./.berth, or BERTH_DATA)')
    .option('--data <dir>', 'data directory (store, workspaces, sockets)')
    .option('--host <addr>', 'address to listen on', undefined)
    .option('--port <port>', 'API port (default 7420)')
    .option('--slots <n>', 'concurrent sessions (default from CPUs and memory)')
    .action(async (opts: { data?: string; host?: string; port?: string; slots?: string }) => {
      const config = loadConfig(env, {
        dataDir: opts.data,
        apiHost: opts.host,
        apiPort: opts.port,
        slots: opts.slots,
      });
      const log = pino({ level: config.logLevel }, destination(2));
      const host = await startHost(config, log);
      process.stderr.write(
        `berth: host up at ${host.url} (slots ${config.slots}, data ${config.dataDir}); Ctrl-C stops it\n`,
      );
      let closing = false;
      const shutdown = (signal: string) => {
        if (closing) return;
        closing = true;
        log.info({ signal }, 'Shutting down');
        host.close().then(
          () => process.exit(0),
          (err: unknown) => {
            log.error({ err }, 'Shutdown failed');
            process.exit(1);
          },
        );
      };
      process.on('SIGINT', () => shutdown('SIGINT'));
      process.on('SIGTERM', () => shutdown('SIGTERM'));
    });
}
