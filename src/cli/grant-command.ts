/**
 * `berth grant AGENT --prefix photos/ --ops read,list`, `berth grant AGENT
 * --list`, `berth grant AGENT --revoke --prefix photos/`, and `berth storage ls AGENT
 * [--prefix P]`: an agent's mediated-storage grants and what it stored, through the API.
 */
import { Command } from 'commander';
import { BerthError, STORAGE_OPS, type StorageGrant, type StorageOp } from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function grantCommand(env: NodeJS.ProcessEnv): Command {
  return new Command('grant')
    .description('Grant an agent operations on its storage keys under a prefix (or --list, --revoke)')
    .argument('<agent>', 'agent name')
    .option('--prefix <folder>', 'keys under this folder ("photos/"); "" = every key of the agent')
    .option('--ops <ops>', `comma-separated operations: ${STORAGE_OPS.join(', ')}`)
    .option('--list', "list the agent's grants")
    .option('--revoke', 'remove the grant of --prefix')
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      `
Examples:
  berth grant photo-bot --prefix photos/ --ops read,list,write
  berth grant photo-bot --list
  berth grant photo-bot --revoke --prefix photos/`,
    )
    .action(
      async (
        agent: string,
        o: { prefix?: string; ops?: string; list?: boolean; revoke?: boolean; json?: boolean },
      ) => {
        const berth = await connect(env);
        const print = (grants: StorageGrant[]) => {
          if (o.json) printJson(grants);
          else
            for (const g of grants) process.stdout.write(`${JSON.stringify(g.prefix)}\t${g.ops.join(',')}\n`);
        };
        if (o.list) return print(await berth.storage.grants(agent));
        if (o.prefix === undefined)
          throw usage(
            'Give --prefix <folder> (e.g. --prefix photos/, or --prefix "" for every key), or --list',
          );
        if (o.revoke) {
          await berth.storage.revoke(agent, o.prefix);
          process.stdout.write(`revoked ${agent} ${JSON.stringify(o.prefix)}\n`);
          return;
        }
        if (!o.ops) throw usage(`Give --ops with some of ${STORAGE_OPS.join(',')} (e.g. --ops read,list)`);
        print([await berth.storage.grant(agent, { prefix: o.prefix, ops: parseOps(o.ops) })]);
      },
    );
}

export function storageCommand(env: NodeJS.ProcessEnv): Command {
  const storage = new Command('storage').description(
    "Read an agent's mediated storage (keys, sizes, hashes)",
  );
  storage
    .command('ls <agent>')
    .description('List the keys an agent stored, in key order')
    .option('--prefix <prefix>', 'only keys starting with this', '')
    .option('--json', 'print JSON')
    .action(async (agent: string, o: { prefix: string; json?: boolean }) => {
      const berth = await connect(env);
      let after = '';
      for (;;) {
        const page = await berth.storage.list(agent, { prefix: o.prefix, after, limit: 1000 });
        for (const obj of page.objects) {
          if (o.json) printJson(obj);
          else
            process.stdout.write(
              `${obj.key}\t${obj.size}\t${obj.sha256}\t${new Date(obj.updatedAt).toISOString()}\n`,
            );
        }
        if (page.next === null) return;
        after = page.next;
      }
    });
  return storage;
}

function parseOps(text: string): StorageOp[] {
  const ops = text.split(',').map((op) => op.trim());
  const unknown = ops.filter((op) => !(STORAGE_OPS as readonly string[]).includes(op));
  if (unknown.length > 0)
    throw usage(`Unknown storage operation ${unknown.join(', ')}; use some of ${STORAGE_OPS.join(',')}`);
  return ops as StorageOp[];
}

function usage(message: string): BerthError {
  return new BerthError('INVALID_INPUT', message, {
    hint: 'Run berth grant --help for every form of the command.',
  });
}
