/**
 * `berth schedule SESSION --cron '…' --tz Europe/Paris --message '…'`, and
 * `berth schedule list [SESSION]`, `berth schedule pause|resume|cancel ID`, through the
 * API.
 */
import { Command, Option } from 'commander';
import { MISSED_POLICIES, type Schedule } from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function scheduleCommand(env: NodeJS.ProcessEnv): Command {
  const schedule = new Command('schedule').description('Send a message to a session on a cron schedule');
  schedule
    .command('add <session>', { isDefault: true })
    .description('Schedule a recurring message (the default: berth schedule SESSION --cron … --message …)')
    .requiredOption(
      '--cron <expr>',
      'cron expression: "min hour day month weekday", or @hourly, @daily, @weekly',
    )
    .requiredOption('--message <text>', 'the message to send at each run')
    .option('--tz <zone>', 'IANA time zone the cron is read in', 'UTC')
    .addOption(
      new Option('--missed <policy>', 'a run missed while no host ran: sent once, or skipped')
        .choices(MISSED_POLICIES)
        .default('once'),
    )
    .option('--agent <name>', 'agent of the session, when it does not exist yet')
    .option('--json', 'print the schedule as JSON')
    .action(
      async (
        session: string,
        o: {
          cron: string;
          message: string;
          tz: string;
          missed: 'once' | 'skip';
          agent?: string;
          json?: boolean;
        },
      ) => {
        const created = await (await connect(env)).schedules.create(session, {
          cron: o.cron,
          message: o.message,
          tz: o.tz,
          missed: o.missed,
          ...(o.agent ? { agent: o.agent } : {}),
        });
        if (o.json) printJson(created);
        else process.stdout.write(`${line(created)}\n`);
      },
    );
  schedule
    .command('list [session]')
    .description('List schedules (of one session, or all)')
    .option('--json', 'print JSON')
    .action(async (session: string | undefined, o: { json?: boolean }) => {
      const schedules = await (await connect(env)).schedules.list(session);
      if (o.json) printJson(schedules);
      else for (const s of schedules) process.stdout.write(`${line(s)}\n`);
    });
  for (const move of ['pause', 'resume', 'cancel'] as const) {
    schedule
      .command(`${move} <id>`)
      .description(`${move[0]!.toUpperCase()}${move.slice(1)} a schedule`)
      .action(async (id: string) => {
        process.stdout.write(`${line(await (await connect(env)).schedules[move](id))}\n`);
      });
  }
  return schedule;
}

function line(s: Schedule): string {
  const next = s.nextRunAt === null ? '-' : new Date(s.nextRunAt).toISOString();
  return `${s.id}\t${s.sessionId}\t${s.status}\t${s.cron} (${s.tz})\tnext ${next}\truns ${s.runs}\tmissed: ${s.missed}`;
}
