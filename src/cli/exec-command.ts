/** `berth exec`: run a command in a session's live sandbox, its output as it comes, its exit code as ours. */
import { Command } from 'commander';
import { BerthError } from '../core/index.js';
import { connect } from './connect.js';

/** One word for /bin/sh: left as is when it is safe, else single-quoted. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

function envPair(pair: string, previous: Record<string, string>): Record<string, string> {
  const eq = pair.indexOf('=');
  if (eq <= 0) throw new BerthError('INVALID_INPUT', `--env takes NAME=VALUE, got ${JSON.stringify(pair)}`);
  return { ...previous, [pair.slice(0, eq)]: pair.slice(eq + 1) };
}

export function execCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('exec')
    .description(
      "Run a command in a session's live sandbox (a resident agent's keeps one between turns); prints its stdout and stderr as they come and exits with its exit code",
    )
    .argument('<session>', 'session id')
    .argument(
      '<command...>',
      'the command (after --); one argument is a shell line, several are quoted as words',
    )
    .option('--cwd <dir>', 'working directory, relative to the workspace')
    .option('--env <NAME=VALUE>', 'set a variable for the command (repeatable)', envPair, {})
    .option(
      '--timeout <ms>',
      'kill the command after this long (default 10 minutes, at most an hour)',
      Number,
    )
    .addHelpText(
      'after',
      `
Examples:
  berth exec s1 -- ls -la
  berth exec s1 -- 'cd src && npm test'
Stopping berth exec (Ctrl-C) kills the command. If the sandbox or its worker ends while the
command runs, berth exec says SANDBOX_RESTARTED and why, and exits 1. A session with no
sandbox bound now (an ephemeral one between turns) is NO_LIVE_SANDBOX.`,
    )
    .action(
      async (
        sessionId: string,
        words: string[],
        o: { cwd?: string; env: Record<string, string>; timeout?: number },
      ) => {
        const command = words.length === 1 ? words[0]! : words.map(shellWord).join(' ');
        const berth = await connect(env);
        const lines = berth.sessions.exec(sessionId, {
          command,
          ...(o.cwd ? { cwd: o.cwd } : {}),
          ...(Object.keys(o.env).length > 0 ? { env: o.env } : {}),
          ...(o.timeout !== undefined ? { timeoutMs: o.timeout } : {}),
        });
        for await (const line of lines) {
          if (line.type === 'error') {
            const reason = line.reason ? ` (${line.reason})` : '';
            throw new BerthError(line.code, `${line.message}${reason}`);
          } else if (line.type !== 'exit') {
            (line.type === 'stdout' ? process.stdout : process.stderr).write(line.data);
          } else {
            if (line.timedOut)
              process.stderr.write('berth: the command ran past its timeout and was killed\n');
            process.exitCode = line.exitCode ?? 1;
          }
        }
      },
    );
}
