/** `berth interrupt`: stop a session's running turn now. */
import { Command } from 'commander';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function interruptCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('interrupt')
    .description(
      "Stop a session's running turn now: its workspace changes are discarded, its messages end interrupted (not retried), and the session goes on with its next message",
    )
    .argument('<session>', 'session id')
    .option('--turn <id>', 'interrupt only this turn (refused if another one is running by then)')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
The turn's work is discarded (the API's ?discard=true, its only form today); keeping it
up to the turn's last checkpoint comes with checkpoints. A turn that committed before the
interrupt reached the store stays committed: the command then fails with NO_RUNNING_TURN.
To take back a message that has not started, use: berth send <session> --cancel <message-id>`,
    )
    .action(async (sessionId: string, o: { turn?: string; json?: boolean }) => {
      const turn = await (await connect(env)).sessions.interrupt(sessionId, o.turn ? { turn: o.turn } : {});
      if (o.json) return printJson(turn);
      process.stdout.write(`turn ${turn.id} of ${sessionId} is being interrupted\n`);
    });
}
