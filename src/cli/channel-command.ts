/**
 * `berth channel add telegram --agent A --token-secret tg --map per-chat --allow @alice,@bob`,
 * `berth channel add slack --agent A --token-secret slack-bot --signing-secret slack-sign`,
 * `berth channel add discord --agent A --token-secret discord-bot --allow-chats <channel id>`,
 * `berth channel add email --agent A --token-secret mail-pw --address bot@example.com
 *   --imap-host imap.example.com --smtp-host smtp.example.com --allow alice@example.com`,
 * `berth channel list`, `pause`, `resume`, `remove`, `outbox`: chat platforms in front of
 * agents, through the API (admin token). The bot token itself is set on the host with
 * `berth secret set`; the channel only names it.
 */
import { Command, Option } from 'commander';
import {
  CHANNEL_MAPPINGS,
  CHANNEL_PLATFORMS,
  CHANNEL_RESPOND,
  type Channel,
  type ChannelOutboxItem,
  type CreateChannelBody,
  MAIL_SECURITY,
  type MailSecurity,
} from '../core/index.js';
import { commaList } from './comma-list.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function channelCommand(env: NodeJS.ProcessEnv): Command {
  const channel = new Command('channel').description(
    'Talk to an agent from a chat platform (Telegram, Slack, Discord) or by email: each chat (or user, or thread) gets its own session',
  );
  channel
    .command('add')
    .argument('<platform>', `the platform: ${CHANNEL_PLATFORMS.join(', ')}`)
    .description(
      "Put a bot in front of an agent. First store its token on the host: berth secret set tg (the token from @BotFather on stdin; for Slack the app's Bot User OAuth Token, and its Signing Secret under a second name; for Discord the bot's token; for email the mailbox's password)",
    )
    .requiredOption('--agent <name>', 'the agent that answers')
    .requiredOption(
      '--token-secret <name>',
      'the name of the bot token (email: the password) in the host secret store (berth secret set <name>)',
    )
    .option(
      '--signing-secret <name>',
      "Slack: the name of the app's Signing Secret in the host secret store (berth secret set <name>); events to /v1/channels/<id>/slack/events must carry its signature. Telegram with --webhook-url: the name of the webhook's secret_token (1-256 of A-Z a-z 0-9 _ -)",
    )
    .option(
      '--socket-mode',
      'Slack: receive events over a Socket Mode WebSocket berth opens (no public URL needed); needs --app-token-secret',
    )
    .option(
      '--app-token-secret <name>',
      'Slack Socket Mode: the name of the app-level token (xapp-…, scope connections:write) in the host secret store',
    )
    .option(
      '--webhook-url <url>',
      "Telegram: berth's public base URL; Telegram then POSTs updates to <url>/v1/channels/<id>/telegram/updates instead of being polled (needs --signing-secret)",
    )
    .option('--address <address>', "email: the bot's address, the From of its replies")
    .option('--mail-user <login>', 'email: the login of both servers (default: the address)')
    .option('--imap-host <host>', 'email: the IMAP server read (IDLE) for inbound mail')
    .option('--imap-port <port>', 'email: default 993 (tls) or 143', Number)
    .addOption(
      new Option(
        '--imap-security <how>',
        'email: TLS from the start, STARTTLS, or none (plain text, the password too: loopback or a trusted network)',
      )
        .choices(MAIL_SECURITY)
        .default('tls'),
    )
    .option('--mailbox <name>', 'email: the IMAP mailbox read', 'INBOX')
    .option('--smtp-host <host>', 'email: the SMTP server replies are sent through')
    .option('--smtp-port <port>', 'email: default 465 (tls), 587 (starttls) or 25', Number)
    .addOption(
      new Option(
        '--smtp-security <how>',
        'email: TLS from the start, STARTTLS, or none (plain text, the password too: loopback or a trusted network)',
      )
        .choices(MAIL_SECURITY)
        .default('tls'),
    )
    .addOption(
      new Option(
        '--map <mapping>',
        'one session per chat (a group shares it; email: per sender), per user in each chat, or per thread (Slack; email: per References root)',
      )
        .choices(CHANNEL_MAPPINGS)
        .default('per-chat'),
    )
    .addOption(
      new Option(
        '--respond <which>',
        'every group message reaches the agent, or only those that mention the bot (Telegram: an @botname mention or a reply to the bot; direct messages always do)',
      )
        .choices(CHANNEL_RESPOND)
        .default('all'),
    )
    .option(
      '--allow <users>',
      'users who may talk to the agent: @username or numeric user id (Telegram), member id U… (Slack), user id (Discord), sender address or @domain (email), comma-separated',
    )
    .option(
      '--allow-chats <ids>',
      'chats whose every member may talk to the agent: numeric chat ids (Telegram), conversation ids C… (Slack), channel ids (Discord: their history is read back after a restart), comma-separated',
    )
    .option(
      '--name <id>',
      "the channel's id (names its sessions tg-<id>-<chat>, sl-<id>-<chat>, dc-<id>-<chat>, em-<id>-<sender>); generated when omitted",
    )
    .option('--json', 'print the channel as JSON')
    .action(
      async (
        platform: string,
        o: {
          agent: string;
          tokenSecret: string;
          signingSecret?: string;
          socketMode?: boolean;
          appTokenSecret?: string;
          webhookUrl?: string;
          map: Channel['mapping'];
          respond: Channel['respondTo'];
          allow?: string;
          allowChats?: string;
          name?: string;
          json?: boolean;
        } & MailOptions,
      ) => {
        if (!(CHANNEL_PLATFORMS as readonly string[]).includes(platform)) {
          process.stderr.write(
            `Platform ${platform} is not supported; choose one of: ${CHANNEL_PLATFORMS.join(', ')}\n`,
          );
          process.exitCode = 2;
          return;
        }
        if (Boolean(o.socketMode) !== (o.appTokenSecret !== undefined)) {
          process.stderr.write(
            'Socket Mode needs both --socket-mode and --app-token-secret <name> (berth secret set <name> < app-token.txt)\n',
          );
          process.exitCode = 2;
          return;
        }
        const missing = [
          ['--address', o.address],
          ['--imap-host', o.imapHost],
          ['--smtp-host', o.smtpHost],
        ].filter(([, v]) => !v);
        if (platform === 'email' && missing.length > 0) {
          process.stderr.write(
            `An email channel needs ${missing.map(([flag]) => flag).join(', ')} (its address and the servers that read and send its mail)\n`,
          );
          process.exitCode = 2;
          return;
        }
        const allowUsers = commaList(o.allow);
        const allowChats = commaList(o.allowChats);
        if (allowUsers.length === 0 && allowChats.length === 0)
          process.stderr.write(
            'Warning: no --allow or --allow-chats: the bot refuses everyone until you add some (remove and add the channel again).\n',
          );
        const created = await (await connect(env)).channels.create({
          platform: platform as Channel['platform'],
          agent: o.agent,
          tokenSecret: o.tokenSecret,
          ...(o.signingSecret ? { signingSecret: o.signingSecret } : {}),
          ...(o.appTokenSecret ? { appTokenSecret: o.appTokenSecret } : {}),
          ...(o.webhookUrl ? { webhookUrl: o.webhookUrl } : {}),
          mapping: o.map,
          respondTo: o.respond,
          allowUsers,
          allowChats,
          ...(o.name ? { name: o.name } : {}),
          ...(platform === 'email' ? { email: emailSettings(o) } : {}),
        });
        if (o.json) printJson(created);
        else process.stdout.write(`${line(created)}\n`);
      },
    );
  channel
    .command('list')
    .description('List channels: id, platform, agent, mapping, state, cursor, allowlist, last error')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const channels = await (await connect(env)).channels.list();
      if (o.json) printJson(channels);
      else for (const c of channels) process.stdout.write(`${line(c)}\n`);
    });
  for (const move of ['pause', 'resume'] as const)
    channel
      .command(`${move} <id>`)
      .description(
        move === 'pause'
          ? 'Pause a channel: nothing is read or sent; messages wait at the platform until resume'
          : 'Resume a paused channel',
      )
      .action(async (id: string) => {
        process.stdout.write(`${line(await (await connect(env)).channels[move](id))}\n`);
      });
  channel
    .command('remove <id>')
    .description('Remove a channel (its sessions stay; sends still owed are dropped)')
    .action(async (id: string) => {
      await (await connect(env)).channels.delete(id);
      process.stdout.write(`channel ${id} removed\n`);
    });
  channel
    .command('outbox <id>')
    .description("A channel's sends: replies, failure notices, refusals, with the platform's message ids")
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      const outbox = await (await connect(env)).channels.outbox(id);
      if (o.json) printJson(outbox);
      else for (const item of outbox) process.stdout.write(`${outboxLine(item)}\n`);
    });
  return channel;
}

interface MailOptions {
  address?: string;
  mailUser?: string;
  imapHost?: string;
  imapPort?: number;
  imapSecurity: MailSecurity;
  mailbox: string;
  smtpHost?: string;
  smtpPort?: number;
  smtpSecurity: MailSecurity;
}

/** The email settings as the API takes them (the action checked that the required ones are there). */
function emailSettings(o: MailOptions): NonNullable<CreateChannelBody['email']> {
  return {
    address: o.address ?? '',
    ...(o.mailUser ? { user: o.mailUser } : {}),
    imapHost: o.imapHost ?? '',
    ...(o.imapPort ? { imapPort: o.imapPort } : {}),
    imapSecurity: o.imapSecurity,
    mailbox: o.mailbox,
    smtpHost: o.smtpHost ?? '',
    ...(o.smtpPort ? { smtpPort: o.smtpPort } : {}),
    smtpSecurity: o.smtpSecurity,
  };
}

function line(c: Channel): string {
  const allow = [...c.allowUsers, ...c.allowChats.map((id) => `chat:${id}`)].join(',') || '-';
  const state = c.paused ? 'paused' : c.leaseOwner ? 'running' : 'idle';
  return `${c.id}\t${c.platform}\tagent ${c.agent}\t${c.mapping}\t${state}\tcursor ${c.cursor}\tallow ${allow}\ttoken-secret ${c.tokenSecret}${c.signingSecret ? `\tsigning-secret ${c.signingSecret}` : ''}${c.appTokenSecret ? `\tsocket-mode app-token-secret ${c.appTokenSecret}` : ''}${c.webhookUrl ? `\twebhook ${c.webhookUrl}` : ''}${c.platform === 'email' ? '' : `\trespond ${c.respondTo}`}${c.email ? `\taddress ${c.email.address}\timap ${c.email.imapHost}:${c.email.imapPort}\tsmtp ${c.email.smtpHost}:${c.email.smtpPort}` : ''}${c.lastError ? `\terror: ${c.lastError}` : ''}`;
}

function outboxLine(o: ChannelOutboxItem): string {
  return `${o.id}\t${o.kind}\tchat ${o.chatId}\t${o.status}\tattempts ${o.attempts}\tparts ${o.partsSent}\tids ${o.platformMessageIds.join(',') || '-'}${o.lastError ? `\terror: ${o.lastError}` : ''}`;
}
