/**
 * Debian's real Postfix and Dovecot for a test, private to it: configuration, queue and
 * maildirs in a temp dir, listening on free loopback ports (SMTP, IMAP, and LMTP between
 * them), in the foreground as children of the test; the system's own services and /etc
 * are not used. Postfix accepts mail for @berth.test from loopback and hands it to
 * Dovecot's LMTP, which files it in each user's maildir (users: a passwd-file, PLAIN
 * passwords). Run as root (Postfix's master must be); scripts/ensure-mail.sh installs them.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ImapFlow } from 'imapflow';
import nodemailer, { type SendMailOptions } from 'nodemailer';
import { eventually, exited, freePort } from './processes.js';

export const MAIL_DOMAIN = 'berth.test';

/** Why the mail tests cannot run here, or undefined when they can. */
export const mailServersMissing =
  spawnSync('postconf', ['-d', 'mail_version']).status === 0 &&
  spawnSync('dovecot', ['--version']).status === 0 &&
  process.getuid?.() === 0
    ? undefined
    : 'needs Postfix and Dovecot (Debian packages; scripts/ensure-mail.sh, run by `make setup`) and root';

export interface MailSummary {
  uid: number;
  messageId: string;
  from: string;
  subject: string;
  inReplyTo: string | null;
  references: string;
  seen: boolean;
  text: string;
}

export class MailServers {
  private dir = '';
  private children: ChildProcess[] = [];
  smtpPort = 0;
  imapPort = 0;

  /** `users`: local part → password. */
  async start(users: Record<string, string>): Promise<this> {
    this.dir = await mkdtemp(join(tmpdir(), 'berth-mail-'));
    // Dovecot's mail processes run as nobody: the maildirs must be reachable.
    await chmod(this.dir, 0o755);
    const [smtp, imap, lmtp] = [await freePort(), await freePort(), await freePort()];
    this.smtpPort = smtp;
    this.imapPort = imap;
    const dovecot = join(this.dir, 'dovecot');
    const mail = join(this.dir, 'mail');
    await mkdir(join(dovecot, 'run'), { recursive: true });
    await mkdir(join(dovecot, 'state'), { recursive: true });
    await mkdir(mail);
    await chown(mail, 65534, 65534);
    await writeFile(
      join(dovecot, 'users'),
      Object.entries(users)
        .map(([u, pw]) => `${u}@${MAIL_DOMAIN}:{PLAIN}${pw}\n`)
        .join(''),
    );
    await writeFile(
      join(dovecot, 'dovecot.conf'),
      `base_dir = ${dovecot}/run
state_dir = ${dovecot}/state
instance_name = berth-test-${imap}
log_path = ${dovecot}/dovecot.log
protocols = imap lmtp
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
mail_location = maildir:${mail}/%u
first_valid_uid = 1
passdb {
  driver = passwd-file
  args = scheme=PLAIN ${dovecot}/users
}
userdb {
  driver = static
  args = uid=nobody gid=nogroup home=${mail}/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${imap}
  }
  inet_listener imaps {
    port = 0
  }
}
service lmtp {
  inet_listener lmtp {
    address = 127.0.0.1
    port = ${lmtp}
  }
}
protocol lmtp {
  postmaster_address = postmaster@${MAIL_DOMAIN}
}
`,
    );
    const postfix = join(this.dir, 'postfix');
    const data = join(this.dir, 'postfix-data');
    await mkdir(postfix);
    await mkdir(join(this.dir, 'postfix-queue'));
    await mkdir(data);
    await chown(data, Number(idOf('-u', 'postfix')), Number(idOf('-g', 'postfix')));
    await writeFile(
      join(postfix, 'main.cf'),
      `compatibility_level = 3.6
queue_directory = ${this.dir}/postfix-queue
data_directory = ${data}
command_directory = /usr/sbin
daemon_directory = /usr/lib/postfix/sbin
mail_owner = postfix
setgid_group = postdrop
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
myhostname = mail.${MAIL_DOMAIN}
mydomain = ${MAIL_DOMAIN}
myorigin = ${MAIL_DOMAIN}
mydestination =
mynetworks = 127.0.0.0/8
virtual_mailbox_domains = ${MAIL_DOMAIN}
virtual_transport = lmtp:inet:127.0.0.1:${lmtp}
alias_maps =
alias_database =
local_recipient_maps =
smtputf8_enable = no
maillog_file = /dev/stdout
syslog_name = postfix-berth-test
`,
    );
    // Debian's services, unchrooted (the queue dir has no copy of /etc), smtpd on our port.
    const master = (await readFile('/etc/postfix/master.cf', 'utf8'))
      .split('\n')
      .map((l) => {
        const f = l.split(/\s+/);
        if (/^[a-z]/.test(l) && f[4] === 'y') f[4] = 'n';
        if (f[0] === 'smtp' && f[1] === 'inet') f[0] = `127.0.0.1:${smtp}`;
        return /^[a-z]/.test(l) ? f.join(' ') : l;
      })
      .join('\n');
    await writeFile(join(postfix, 'master.cf'), master);
    this.children.push(spawnLogged('dovecot', ['-F', '-c', join(dovecot, 'dovecot.conf')], this.dir));
    this.children.push(spawnLogged('postfix', ['-c', postfix, 'start-fg'], this.dir));
    try {
      for (const port of [smtp, imap, lmtp])
        await eventually(`mail server listening on ${port}`, () => listening(port), 20_000);
    } catch (err) {
      const logs = await readFile(join(this.dir, 'postfix.log'), 'utf8').catch(() => '');
      await this.stop();
      throw new Error(`${(err as Error).message}; postfix said: ${logs.slice(-2000)}`, { cause: err });
    }
    return this;
  }

  async stop(): Promise<void> {
    spawnSync('postfix', ['-c', join(this.dir, 'postfix'), 'stop']);
    for (const c of this.children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
    await Promise.all(this.children.map(exited));
    if (this.dir) await rm(this.dir, { recursive: true, force: true });
  }

  /** Sends through Postfix, as a mail client does. */
  async send(o: SendMailOptions): Promise<void> {
    const transport = nodemailer.createTransport({ host: '127.0.0.1', port: this.smtpPort, ignoreTLS: true });
    await transport.sendMail(o);
    transport.close();
  }

  /** Every mail in a user's INBOX, oldest first, with its \Seen flag and its text. */
  async inbox(user: string, password: string): Promise<MailSummary[]> {
    const client = new ImapFlow({
      host: '127.0.0.1',
      port: this.imapPort,
      secure: false,
      doSTARTTLS: false,
      auth: { user: `${user}@${MAIL_DOMAIN}`, pass: password },
      logger: false,
    });
    await client.connect();
    const lock = await client.getMailboxLock('INBOX');
    const mails: MailSummary[] = [];
    try {
      if (client.mailbox && client.mailbox.exists > 0)
        for await (const m of client.fetch('1:*', { uid: true, envelope: true, flags: true, source: true })) {
          const source = m.source?.toString('utf8') ?? '';
          const split = source.search(/\r?\n\r?\n/);
          const head = split < 0 ? source : source.slice(0, split);
          const header = (name: string) =>
            head.replace(/\r?\n[ \t]+/g, ' ').match(new RegExp(`^${name}:\\s*(.*)$`, 'im'))?.[1] ?? '';
          mails.push({
            uid: m.uid,
            messageId: m.envelope?.messageId ?? '',
            from: m.envelope?.from?.[0]?.address ?? '',
            subject: m.envelope?.subject ?? '',
            inReplyTo: m.envelope?.inReplyTo ?? null,
            references: header('References'),
            seen: m.flags?.has('\\Seen') ?? false,
            text: source.slice(head.length).trim(),
          });
        }
    } finally {
      lock.release();
      await client.logout();
    }
    return mails;
  }
}

function idOf(flag: '-u' | '-g', user: string): string {
  return spawnSync('id', [flag, user], { encoding: 'utf8' }).stdout.trim();
}

/**
 * A server in the foreground, its output in `<dir>/<command>.log`: a file, not a pipe, since
 * Postfix logs to /dev/stdout, which cannot be opened on the socket a Node pipe is.
 */
function spawnLogged(command: string, args: string[], dir: string): ChildProcess {
  const log = openSync(join(dir, `${command}.log`), 'a');
  const child = spawn(command, args, { stdio: ['ignore', log, log] });
  closeSync(log);
  return child;
}

function listening(port: number): Promise<true | undefined> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(undefined));
  });
}
