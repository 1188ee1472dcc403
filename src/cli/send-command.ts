/** `berth send`: post a message to a session; with --wait, follow it to its reply. */
import { Command } from 'commander';
import { BerthError, type CommandResult, loadConfig, type Message, type SessionView } from '../core/index.js';
import { ApiClient } from './client.js';
import { printJson } from './output.js';

export interface Posted {
  message: Message;
  session: SessionView;
  eventId: number;
}

export function sendCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('send')
    .description('Send a message to a session (created on first use with --agent)')
    .argument('<session>', 'session id')
    .argument('<text>', "message text; '-' reads it from standard input")
    .option('--agent <name>', 'agent of a new session')
    .option('--wait', 'wait for the reply and print it (exit code: the job exit code for command agents)')
    .option('--json', 'print JSON')
    .action(
      async (sessionId: string, textArg: string, o: { agent?: string; wait?: boolean; json?: boolean }) => {
        const client = new ApiClient(loadConfig(env).apiUrl);
        const text = textArg === '-' ? await readStdin() : textArg;
        const posted = await client.request<Posted>(
          'POST',
          `/v1/sessions/${encodeURIComponent(sessionId)}/messages`,
          {
            text,
            ...(o.agent ? { agent: o.agent } : {}),
          },
        );
        if (!o.wait) {
          if (o.json) return printJson(posted);
          const where = posted.session.queuePosition
            ? `queue position ${posted.session.queuePosition}`
            : posted.session.status;
          process.stdout.write(`message ${posted.message.id} accepted for ${sessionId} (${where})\n`);
          return;
        }
        const reply = await waitForReply(client, sessionId, posted, !o.json);
        if (o.json) return printJson(reply);
        const result = reply.data as CommandResult | null;
        if (result && typeof result === 'object' && 'exitCode' in result) {
          process.stdout.write(reply.text);
          process.stderr.write(result.stderr);
          process.exitCode = result.exitCode ?? 1;
        } else {
          process.stdout.write(`${reply.text}\n`);
        }
      },
    );
}

/** Follows the session's events from the message's 'queued' event until its reply or its failure. */
export async function waitForReply(
  client: ApiClient,
  sessionId: string,
  posted: Posted,
  showProgress: boolean,
): Promise<{ text: string; data: unknown }> {
  const say = (line: string) =>
    showProgress && process.stderr.isTTY && process.stderr.write(`\r\x1b[K${line}`);
  const messageId = posted.message.id;
  try {
    for await (const e of client.events(sessionId, posted.eventId)) {
      const d = e.data;
      switch (e.type) {
        case 'queued':
          say(`queued at position ${d.position}`);
          break;
        case 'started':
          say(`running (attempt ${d.attempt})`);
          break;
        case 'progress':
          say(`running: ${String(d.text)}`);
          break;
        case 'retrying':
          if (d.messageId === messageId) say(`retrying in ${d.retryInMs} ms: ${String(d.error)}`);
          break;
        case 'failed':
          if (d.messageId === messageId) {
            throw new BerthError(
              'SANDBOX_FAILED',
              `Message ${messageId} failed after ${d.tries} tries: ${String(d.error)}`,
            );
          }
          break;
        case 'reply':
          if ((d.inReplyTo as number[]).includes(messageId)) return { text: String(d.text), data: d.data };
          break;
      }
    }
  } finally {
    say('');
  }
  throw new BerthError('HOST_UNREACHABLE', `Event stream of session ${sessionId} ended before the reply`);
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}
