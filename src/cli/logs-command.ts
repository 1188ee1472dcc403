/**
 * `berth logs SESSION`: the session's events from the start (or --after), then live until
 * Ctrl-C; with --turn, one turn's timeline instead (its tries, model calls, tool calls,
 * checkpoints, the kill of a try and the resume of the next), followed with --follow.
 */
import { Command, InvalidArgumentError } from 'commander';
import { BerthError } from '../core/index.js';
import { connect } from './connect.js';
import { turnRef } from './history-command.js';
import { describeEvent } from './send-command.js';
import { printTimeline } from './turn-timeline-lines.js';

interface LogsOptions {
  after?: string;
  turn?: string;
  /** undefined: the default of the mode (events follow, a timeline does not). */
  follow?: boolean;
  json?: boolean;
}

export function logsCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('logs')
    .description(
      "Print a session's events (queued, started, progress, checkpoint, reply, retrying, failed) and follow them; with --turn, one turn's timeline",
    )
    .argument('<session>', 'session id')
    .option('--after <id>', 'start after this event id (default: from the first event)')
    .option(
      '--turn <turn>',
      "print this turn's timeline instead: a turn id, the workspace version its commit made, or last (the newest turn)",
      timelineTurn,
    )
    .option(
      '--follow',
      'keep printing as it happens (the default for events; a timeline: until the turn is over)',
    )
    .option('--no-follow', 'stop after what happened so far (the default for a timeline)')
    .option('--json', 'one JSON object per line (an event, or a timeline entry)')
    .addHelpText(
      'after',
      `
A timeline line is the time (UTC) and what happened; within a try, indented:
  12:00:00.950  try 1 started  (worker w1, sandbox berth-s-1)
  12:00:01.123    model call 3  (checkpoint 3, 1.2 KiB; 812 in / 64 out tokens)
  12:00:04.020  try 1 aborted SANDBOX_EXITED: …  (retry in 1000 ms)
  12:00:05.031  try 2 started  (worker w1, sandbox berth-s-2)
  12:00:05.031  resumed from checkpoint 3  (model-call; 3 earlier model calls journalled, not paid again)

Examples:
  berth logs main                       events so far, then live (Ctrl-C stops)
  berth logs main --turn last --follow  the newest turn's timeline until it is over
  berth logs main --turn 3              the turn whose commit made workspace version 3
  berth session history main            the turns to choose from`,
    )
    .action(async (sessionId: string, o: LogsOptions) => {
      const write = (line: string) => process.stdout.write(`${line}\n`);
      if (o.turn !== undefined) {
        if (o.after !== undefined)
          throw new BerthError(
            'INVALID_INPUT',
            '--after starts the event stream at an event id; a timeline (--turn) always shows the whole turn',
            {
              hint: `Drop --after, or drop --turn to read the events: berth logs ${sessionId} --after ${o.after}`,
            },
          );
        const berth = await connect(env);
        const stop = new AbortController();
        process.once('SIGINT', () => stop.abort());
        await printTimeline(
          berth,
          sessionId,
          o.turn,
          { follow: o.follow ?? false, json: o.json ?? false, signal: stop.signal },
          write,
        );
        return;
      }
      await printEvents(env, sessionId, o, write);
    });
}

/** --turn: `last`, or what berth session diff takes. */
function timelineTurn(value: string): string {
  if (value === 'last') return value;
  try {
    return turnRef(value);
  } catch {
    throw new InvalidArgumentError(
      'give last (the newest turn), the workspace version its commit made (a number) or its turn id (turn_…), as berth session history lists them',
    );
  }
}

async function printEvents(
  env: NodeJS.ProcessEnv,
  sessionId: string,
  o: LogsOptions,
  write: (line: string) => void,
): Promise<void> {
  const after = Number(o.after ?? '0');
  if (!Number.isInteger(after) || after < 0) {
    throw new BerthError('INVALID_INPUT', `--after must be an event id (a whole number), not ${o.after}`);
  }
  const follow = o.follow ?? true;
  const berth = await connect(env);
  // Without --follow: stop once the stream has been quiet briefly (the backlog is sent at once).
  const stop = new AbortController();
  let quiet: NodeJS.Timeout | undefined;
  const arm = () => {
    if (follow) return;
    clearTimeout(quiet);
    quiet = setTimeout(() => stop.abort(), 500);
  };
  arm();
  try {
    for await (const e of berth.sessions.events(sessionId, { after, signal: stop.signal })) {
      arm();
      if (o.json) {
        write(JSON.stringify(e));
        continue;
      }
      const line = describeEvent(e);
      if (line === null) continue;
      const at = typeof e.data.at === 'number' ? new Date(e.data.at).toISOString().slice(11, 23) : '';
      write(`${at} ${e.id ?? '-'} ${line}`);
    }
  } catch (err) {
    if ((err as Error).name !== 'AbortError') throw err;
  } finally {
    clearTimeout(quiet);
  }
}
