/** `berth session list|show|delete|recycle|resume|reset-workspace|fork|rewind|history|diff|files`. */
import { Command } from 'commander';
import type { ListSessionsQuery } from '../core/index.js';
import { connect } from './connect.js';
import { addHistoryCommands, versionNumber } from './history-command.js';
import { printJson } from './output.js';
import { renderSessions } from './status-command.js';

export function sessionCommand(env: NodeJS.ProcessEnv): Command {
  const session = new Command('session').description(
    'List, show, delete (stop and archive), recycle, resume, reset the workspace of, fork and rewind sessions; read their history (turns, diffs, files at a version)',
  );
  session
    .command('list')
    .description('List sessions')
    .option('--status <status>', 'only sessions in this status (queued, running, idle, failed, archived...)')
    .option('--agent <name>', 'only sessions of this agent')
    .option('--archived', 'include archived sessions')
    .option('--json', 'print JSON')
    .action(async (o: { status?: string; agent?: string; archived?: boolean; json?: boolean }) => {
      const sessions = await (await connect(env)).sessions.list({
        status: o.status as ListSessionsQuery['status'],
        agent: o.agent,
        archived: o.archived ? 'true' : 'false',
      });
      if (o.json) return printJson(sessions);
      process.stdout.write(`${renderSessions(sessions)}\n`);
    });
  session
    .command('show <id>')
    .description('A session: status, generation, queue position and ETA, current turn, last reply, turns')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const berth = await connect(env);
      const [view, turns] = await Promise.all([berth.sessions.get(id), berth.sessions.turns(id)]);
      if (o.json) return printJson({ ...view, turns });
      process.stdout.write(`${renderSessions([view])}\n\nturns:\n`);
      for (const t of turns) {
        const ms = t.endedAt === null ? 'running' : `${t.endedAt - t.startedAt} ms`;
        process.stdout.write(
          `  ${t.id} attempt ${t.attempt} gen ${t.generation} ${t.status} ${ms}${t.error ? ` ${t.error}` : ''}\n`,
        );
      }
    });
  session
    .command('delete <id>')
    .description('Stop and archive a session: its open messages fail, its sandbox is fenced off')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const view = await (await connect(env)).sessions.delete(id);
      if (o.json) return printJson(view);
      process.stdout.write(`session ${id} archived\n`);
    });
  session
    .command('recycle <id>')
    .description(
      "Replace a resident session's sandbox after its current turn; queued messages wait for the new one",
    )
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const view = await (await connect(env)).sessions.recycle(id);
      if (o.json) return printJson(view);
      process.stdout.write(`session ${id}: its sandbox is replaced after the current turn\n`);
    });
  // The two ways on for a held session: as it is, or with the loss of its resident workspace accepted.
  for (const [name, done, description] of [
    [
      'resume',
      'resumed',
      'Let a held session go on as it is: its messages are queued again (held again if its resident workspace is still missing)',
    ],
    [
      'reset-workspace',
      'workspace reset',
      "Accept the loss of a held session's resident workspace: it goes on with an empty one (recorded in the audit log)",
    ],
  ] as const)
    session
      .command(`${name} <id>`)
      .description(description)
      .option('--json', 'print JSON')
      .action(async (id: string, o: { json?: boolean }) => {
        const { sessions } = await connect(env);
        const view = await (name === 'resume' ? sessions.resume(id) : sessions.resetWorkspace(id));
        if (o.json) return printJson(view);
        process.stdout.write(`session ${id}: ${done}, status ${view.status}\n`);
      });
  session
    .command('fork <source> [new]')
    .description(
      "A new session of the same agent starting from a version of <source>'s workspace (its current one by default) and <source>'s state (objects shared, not copied); the two then diverge",
    )
    .option('--from <n>', 'the workspace version to start from (berth session history)', versionNumber)
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nExamples:\n  berth session fork main try-refactor && berth send try-refactor "…" --wait\n  berth session fork main before-refactor --from 3',
    )
    .action(async (source: string, as: string | undefined, o: { from?: number; json?: boolean }) => {
      const view = await (await connect(env)).sessions.fork(source, as, { fromVersion: o.from });
      if (o.json) return printJson(view);
      process.stdout.write(
        `session ${view.id} forked from ${source} at workspace version ${view.workspaceVersion}\n`,
      );
    });
  session
    .command('rewind <id>')
    .description(
      "The session's workspace goes back to an older version's, as a new version: files and harness transcripts (.berth/) go back, history is kept (rewind again to undo). Refused while the session answers messages",
    )
    .requiredOption('--to <n>', 'the workspace version to go back to (berth session history)', versionNumber)
    .option('--json', 'print JSON')
    .addHelpText('after', '\nExample:\n  berth session rewind main --to 3 && berth session files main')
    .action(async (id: string, o: { to: number; json?: boolean }) => {
      const result = await (await connect(env)).sessions.rewind(id, o.to);
      if (o.json) return printJson(result);
      process.stdout.write(
        `session ${id} rewound to version ${result.toVersion}: now at version ${result.version} (${result.objects} object${result.objects === 1 ? '' : 's'} named again, none copied)\n`,
      );
    });
  addHistoryCommands(session, env);
  return session;
}
