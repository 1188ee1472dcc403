/** `berth logs SESSION`: the session's events from the start (or --after), then live until Ctrl-C. */
import { Command } from 'commander';
import { BerthError } from '../core/index.js';
import { connect } from './connect.js';
import { describeEvent } from './send-command.js';

export function logsCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('logs')
    .description(
      "Print a session's events (queued, started, progress, reply, retrying, failed) and follow them",
    )
    .argument('<session>', 'session id')
    .option('--after <id>', 'start after this event id (default: from the first event)', '0')
    .option('--no-follow', 'stop after the events so far')
    .option('--json', 'one JSON object per line')
    .action(async (sessionId: string, o: { after: string; follow: boolean; json?: boolean }) => {
      const after = Number(o.after);
      if (!Number.isInteger(after) || after < 0) {
        throw new BerthError('INVALID_INPUT', `--after must be an event id (a whole number), not ${o.after}`);
      }
      const berth = await connect(env);
      // Without --follow: stop once the stream has been quiet briefly (the backlog is sent at once).
      const stop = new AbortController();
      let quiet: NodeJS.Timeout | undefined;
      const arm = () => {
        if (o.follow) return;
        clearTimeout(quiet);
        quiet = setTimeout(() => stop.abort(), 500);
      };
      arm();
      try {
        for await (const e of berth.sessions.events(sessionId, { after, signal: stop.signal })) {
          arm();
          if (o.json) {
            process.stdout.write(`${JSON.stringify(e)}\n`);
            continue;
          }
          const line = describeEvent(e);
          if (line === null) continue;
          const at = typeof e.data.at === 'number' ? new Date(e.data.at).toISOString().slice(11, 23) : '';
          process.stdout.write(`${at} ${e.id ?? '-'} ${line}\n`);
        }
      } catch (err) {
        if ((err as Error).name !== 'AbortError') throw err;
      } finally {
        clearTimeout(quiet);
      }
    });
}
