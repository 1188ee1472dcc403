/**
 * `berth send`: post a message to a session; with --wait, follow it to its reply. With
 * --cancel, take back a message of the session that has not started.
 */
import { Command } from 'commander';
import type { StreamedEvent } from '../client/index.js';
import {
  BerthError,
  type CommandResult,
  formatBytes,
  type LeftRunning,
  type SessionView,
} from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function sendCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('send')
    .description('Send a message to a session (created on first use with --agent)')
    .argument('<session>', 'session id')
    .argument('[text]', "message text; '-' reads it from standard input")
    .option('--agent <name>', 'agent of a new session')
    .option('--wait', 'wait for the reply and print it (exit code: the job exit code for command agents)')
    .option(
      '--cancel <message-id>',
      'take back a queued message instead of sending one: it is never run (refused once its turn started: use berth interrupt)',
    )
    .option('--json', 'print JSON')
    .action(
      async (
        sessionId: string,
        textArg: string | undefined,
        o: { agent?: string; wait?: boolean; cancel?: string; json?: boolean },
      ) => {
        const berth = await connect(env);
        if (o.cancel !== undefined) {
          if (textArg !== undefined || o.wait || o.agent)
            throw new BerthError(
              'INVALID_INPUT',
              'berth send --cancel takes a session and a message id, no text',
            );
          if (!/^\d+$/.test(o.cancel))
            throw new BerthError(
              'INVALID_INPUT',
              `--cancel: a message id (a positive integer), not ${o.cancel}`,
            );
          const message = await berth.sessions.cancelMessage(sessionId, Number(o.cancel));
          if (o.json) return printJson(message);
          process.stdout.write(`message ${message.id} of ${sessionId} cancelled\n`);
          return;
        }
        if (textArg === undefined) throw new BerthError('INVALID_INPUT', 'berth send needs the message text');
        const text = textArg === '-' ? await readStdin() : textArg;
        const posted = await berth.sessions.post(sessionId, { text, ...(o.agent ? { agent: o.agent } : {}) });
        if (!o.wait) {
          if (o.json) return printJson(posted);
          const where = posted.session.queuePosition
            ? `queue position ${posted.session.queuePosition}`
            : posted.session.status;
          process.stdout.write(`message ${posted.message.id} accepted for ${sessionId} (${where})\n`);
          return;
        }
        const say = (line: string) =>
          !o.json && process.stderr.isTTY && process.stderr.write(`\r\x1b[K${line}`);
        const reply = await berth
          .waitForReply(sessionId, posted, { onEvent: (e) => say(describeEvent(e) ?? '') })
          .finally(() => say(''));
        if (o.json) return printJson(reply);
        const result = reply.data as CommandResult | null;
        if (result && typeof result === 'object' && 'exitCode' in result) {
          process.stdout.write(reply.text);
          process.stderr.write(result.stderr);
          if (result.leftRunning) process.stderr.write(`${describeLeftRunning(result.leftRunning)}\n`);
          process.exitCode = result.exitCode ?? 1;
        } else {
          process.stdout.write(`${reply.text}\n`);
        }
      },
    );
}

/** The line `berth send` adds when a command job left processes running. */
function describeLeftRunning(left: LeftRunning): string {
  const what = left.processes.map((p) => `${p.pid} ${p.command}`).join('; ');
  const fate = left.fate === 'kept-resident' ? 'kept: the agent is resident' : 'killed when the turn ended';
  return `berth: the job left ${left.processes.length} process(es) running (${fate}): ${what}`;
}

/** One line for a session event, as the live views show it; null for events with nothing to show. */
export function describeEvent(e: StreamedEvent): string | null {
  const d = e.data;
  switch (e.type) {
    case 'queued': {
      const held = d.heldBy as SessionView['heldBy'] | undefined;
      if (held) return `message ${d.messageId} waits behind message ${held.messageId}, which is in backoff`;
      return d.position == null ? null : `queued at position ${d.position}`;
    }
    case 'started':
      return `running (attempt ${d.attempt})`;
    case 'progress':
      return `running: ${String(d.text)}`;
    case 'checkpoint':
      return `checkpoint ${d.seq} (${String(d.label)}, ${formatBytes(Number(d.bytes ?? 0))})`;
    case 'retrying':
      return `message ${d.messageId}: retrying in ${d.retryInMs} ms (later messages wait for it): ${String(d.error)}`;
    case 'failed':
      return `message ${d.messageId} failed after ${d.tries} tries, later messages go on: ${String(d.error)}`;
    case 'reply':
      return `reply to ${repliedTo(d.inReplyTo)}: ${String(d.text)}`;
    case 'held':
      return `session held, message ${d.messageId} kept (${String(d.code)}): ${String(d.error)}`;
    case 'archived':
      return 'archived';
    case 'cancelled':
      return `message ${d.messageId} cancelled, later messages go on`;
    case 'interrupting':
      return `interrupting turn ${String(d.turnId)}`;
    case 'interrupted':
      return `message ${d.messageId} interrupted, later messages go on`;
    case 'rewound':
      return `workspace rewound to version ${d.toVersion} (now version ${d.version})`;
    default:
      return null;
  }
}

function repliedTo(ids: unknown): string {
  const list = Array.isArray(ids) ? ids : [];
  return `${list.length === 1 ? 'message' : 'messages'} ${list.join(', ')}`;
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
