/**
 * `berth secret set NAME [VALUE]` and `berth secret list`: the host's secret store, in
 * the data dir, written directly (never through the HTTP API, so a value crosses no
 * socket). A value read from stdin stays out of the shell history and the process list.
 */
import { Command } from 'commander';
import { hostPaths, loadConfig } from '../core/index.js';
import { SecretStore } from '../secrets/index.js';
import { printJson } from './output.js';

export function secretCommand(env: NodeJS.ProcessEnv): Command {
  const store = () => {
    const config = loadConfig(env);
    return new SecretStore({ path: hostPaths(config.dataDir).secretsFile, key: config.secretKey });
  };
  const secret = new Command('secret').description(
    'Store provider keys and other secrets on the host; the gateway adds them to requests, sandboxes never see them',
  );
  secret
    .command('set <name> [value]')
    .description(
      'Set a secret (the value is read from stdin when omitted: berth secret set anthropic < key.txt)',
    )
    .action(async (name: string, value: string | undefined) => {
      const text = value ?? (await readStdin());
      await store().set(name, text);
      process.stdout.write(`secret ${name} set\n`);
    });
  secret
    .command('list')
    .description('List secret names (never values)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const names = await store().list();
      if (o.json) printJson(names);
      else for (const name of names) process.stdout.write(`${name}\n`);
    });
  return secret;
}

/** stdin without its final newline (what `echo key |` or a file adds). */
async function readStdin(): Promise<string> {
  if (process.stdin.isTTY) process.stderr.write('value (then Ctrl-D): ');
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks)
    .toString('utf8')
    .replace(/\r?\n$/, '');
}
