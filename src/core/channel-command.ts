/**
 * Chat commands: a message whose whole text is `/status` or `/interrupt` is answered by
 * berth (through the outbox) and never reaches the agent. Decided in the inbound
 * transaction like any message (decideChannelInbound), so it runs exactly once; only a
 * sender allowed to talk to the agent may use them. Pure: the texts answered are built here.
 */
import type { SessionView } from './types.js';

export const CHANNEL_COMMANDS = ['status', 'interrupt'] as const;
export type ChannelCommand = (typeof CHANNEL_COMMANDS)[number];

/**
 * The command a message's text is, or null. Exactly `/status` or `/interrupt` (surrounding
 * blanks aside); Telegram names the bot after a command sent in a group (`/status@mybot`),
 * which is the same command.
 */
export function parseChannelCommand(text: string): ChannelCommand | null {
  const match = /^\/(status|interrupt)(?:@[A-Za-z0-9_]{1,64})?$/.exec(text.trim());
  return match ? (match[1] as ChannelCommand) : null;
}

/** What `/status` answers: the session's state, its place in the queue, its messages waiting. */
export function channelStatusText(
  view: Pick<SessionView, 'id' | 'status' | 'queuePosition' | 'pending'> | null,
): string {
  if (view === null) return 'No session yet: your next message starts one.';
  const waiting = `${view.pending} message${view.pending === 1 ? '' : 's'} waiting`;
  const place = view.queuePosition === null ? '' : `, position ${view.queuePosition} in the queue`;
  return `Session ${view.id}: ${view.status}${place}, ${waiting}.`;
}

/** What `/interrupt` did: asked the running turn to stop, found it already asked, or found none. */
export type ChannelInterruptOutcome = 'interrupted' | 'already-interrupting' | 'nothing-running';

export function channelInterruptText(outcome: ChannelInterruptOutcome): string {
  switch (outcome) {
    case 'interrupted':
      return 'Interrupted the running turn: its changes are discarded, and the session goes on with its next message.';
    case 'already-interrupting':
      return 'The running turn is already being interrupted.';
    case 'nothing-running':
      return 'Nothing is running: there was nothing to interrupt.';
  }
}
