/** `berth token create|list|revoke`: tenant API tokens, through the API with the admin token. */
import { Command, InvalidArgumentError } from 'commander';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function tokenCommand(env: NodeJS.ProcessEnv): Command {
  const token = new Command('token').description('Issue, list and revoke API tokens (needs the admin token)');
  token
    .command('create')
    .description('Issue a token for a tenant; its secret is printed once and stored only as a hash')
    .requiredOption('--tenant <tenant>', 'tenant the token speaks for')
    .option('--label <text>', 'what the token is for', '')
    .option(
      '--weight <n>',
      "the tenant's share of claims against a weight-1 tenant's (1-1000; default: unchanged, 1 at first)",
      parseWeight,
    )
    .option('--json', 'print JSON')
    .action(async (o: { tenant: string; label: string; weight?: number; json?: boolean }) => {
      const body = {
        tenant: o.tenant,
        label: o.label,
        ...(o.weight === undefined ? {} : { weight: o.weight }),
      };
      const issued = await (await connect(env)).tokens.create(body);
      if (o.json) return printJson(issued);
      process.stderr.write(`token ${issued.id} for tenant ${issued.tenant} (shown once; keep it secret):\n`);
      process.stdout.write(`${issued.token}\n`);
    });
  token
    .command('list')
    .description('List tokens (never their secrets)')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const tokens = await (await connect(env)).tokens.list();
      if (o.json) return printJson(tokens);
      for (const t of tokens) {
        const who = t.admin ? 'admin' : `tenant ${t.tenant}`;
        const state = t.revokedAt === null ? 'live' : 'revoked';
        process.stdout.write(`${t.tokenId}\t${who}\t${state}\t${t.label}\n`);
      }
    });
  token
    .command('revoke <id>')
    .description('Revoke a token at once')
    .option('--json', 'print JSON')
    .action(async (id: string, o: { json?: boolean }) => {
      await (await connect(env)).tokens.revoke(id);
      if (o.json) return printJson({ revoked: id });
      process.stdout.write(`token ${id} revoked\n`);
    });
  return token;
}

/** Whole numbers only; the API checks the range and names the fix. */
function parseWeight(value: string): number {
  if (!/^\d+$/.test(value)) throw new InvalidArgumentError('a whole number, e.g. --weight 3');
  return Number(value);
}
