/** `berth agent create|list`. */
import { Command, Option } from 'commander';
import { type Agent, loadConfig, PROVIDERS } from '../core/index.js';
import { ApiClient } from './client.js';
import { printJson } from './output.js';

export function agentCommand(env: NodeJS.ProcessEnv): Command {
  const client = () => new ApiClient(loadConfig(env).apiUrl);
  const agent = new Command('agent').description('Create and inspect agents (named sandbox configurations)');
  agent
    .command('create <name>')
    .description('Create an agent')
    .addOption(
      new Option('--provider <provider>', 'what runs a message').choices(PROVIDERS).makeOptionMandatory(),
    )
    .option('--image <image>', 'sandbox image (default: the base image)')
    .option('--memory <mb>', 'memory limit in MiB', '512')
    .option('--cpus <n>', 'CPU limit', '1')
    .option('--pids <n>', 'process limit', '256')
    .option('--json', 'print the agent as JSON')
    .action(
      async (
        name: string,
        o: { provider: string; image?: string; memory: string; cpus: string; pids: string; json?: boolean },
      ) => {
        const created = await client().request<Agent>('POST', '/v1/agents', {
          name,
          provider: o.provider,
          ...(o.image ? { image: o.image } : {}),
          memoryMb: Number(o.memory),
          cpus: Number(o.cpus),
          pidsLimit: Number(o.pids),
        });
        if (o.json) printJson(created);
        else
          process.stdout.write(
            `agent ${created.name} created (provider ${created.provider}, ${created.memoryMb} MiB, ${created.cpus} CPU)\n`,
          );
      },
    );
  agent
    .command('list')
    .description('List agents')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const { agents } = await client().request<{ agents: Agent[] }>('GET', '/v1/agents');
      if (o.json) return printJson(agents);
      for (const a of agents)
        process.stdout.write(`${a.name}\t${a.provider}\t${a.memoryMb} MiB\t${a.cpus} CPU\n`);
    });
  return agent;
}
