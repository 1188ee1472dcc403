/** The `berth` command. Reads process.env once, through loadConfig, inside each command. */
import { Command } from 'commander';
import { agentCommand } from './agent-command.js';
import { channelCommand } from './channel-command.js';
import { chaosCommand } from './chaos-command.js';
import { demoCommand } from './demo-command.js';
import { execCommand } from './exec-command.js';
import { filesCommand } from './files-command.js';
import { grantCommand, storageCommand } from './grant-command.js';
import { imageCommandFor } from './image-wiring.js';
import { interruptCommand } from './interrupt-command.js';
import { logsCommand } from './logs-command.js';
import { mcpCommand } from './mcp-command.js';
import { exitWithError } from './output.js';
import { scheduleCommand } from './schedule-command.js';
import { secretCommand } from './secret-command.js';
import { sendCommand } from './send-command.js';
import { sessionCommand } from './session-command.js';
import { statusCommand } from './status-command.js';
import { tokenCommand } from './token-command.js';
import { upCommand, workerCommand } from './up-command.js';

const VERSION = '0.1.0';

export async function main(argv: string[], env: NodeJS.ProcessEnv): Promise<void> {
  const program = new Command('berth')
    .description('Crash-safe, disposable sandboxes for AI-agent sessions')
    .version(VERSION)
    // -V/--version only before a command: `berth session files S --version 3` is the command's own.
    .enablePositionalOptions()
    .showHelpAfterError()
    .addCommand(upCommand(env))
    .addCommand(workerCommand(env))
    .addCommand(agentCommand(env))
    .addCommand(sendCommand(env))
    .addCommand(interruptCommand(env))
    .addCommand(execCommand(env))
    .addCommand(filesCommand(env))
    .addCommand(sessionCommand(env))
    .addCommand(logsCommand(env))
    .addCommand(statusCommand(env))
    .addCommand(tokenCommand(env))
    .addCommand(imageCommandFor(env))
    .addCommand(demoCommand(env))
    .addCommand(chaosCommand(env))
    .addCommand(secretCommand(env))
    .addCommand(scheduleCommand(env))
    .addCommand(channelCommand(env))
    .addCommand(grantCommand(env))
    .addCommand(storageCommand(env))
    .addCommand(mcpCommand(env, VERSION))
    .addHelpText(
      'after',
      `
Quick start:
  berth up &                                   host on 127.0.0.1:7420, data in ./.berth
  berth agent create sh --provider command
  berth send s1 'echo hello; id -u' --agent sh --wait
  berth status`,
    );
  try {
    await program.parseAsync(argv);
  } catch (err) {
    exitWithError(err);
  }
}
