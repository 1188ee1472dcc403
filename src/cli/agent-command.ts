/** `berth agent create|list`. */
import { Command, Option } from 'commander';
import { PROVIDERS, type ProviderName } from '../core/index.js';
import { commaList } from './comma-list.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

export function agentCommand(env: NodeJS.ProcessEnv): Command {
  const agent = new Command('agent').description('Create and inspect agents (named sandbox configurations)');
  agent
    .command('create <name>')
    .description('Create an agent')
    .addOption(
      new Option('--provider <provider>', 'what runs a message').choices(PROVIDERS).makeOptionMandatory(),
    )
    .option(
      '--image <image>',
      'sandbox image (default: the base image, or for a harness or packages the agent image `berth image build --agent NAME` builds)',
    )
    .option('--apt <packages>', "Debian packages in the agent's image (comma-separated)")
    .option(
      '--npm <packages>',
      "npm packages in the agent's image, each at an exact version: typescript@5.6.3 (comma-separated)",
    )
    .option('--memory <mb>', 'memory limit in MiB', '512')
    .option('--cpus <n>', 'CPU limit', '1')
    .option('--pids <n>', 'process limit', '256')
    .option('--model <name>', 'model providers and harnesses: the model, e.g. claude-sonnet-4-5')
    .option(
      '--config-dir <dir>',
      'harnesses: host dir with CLAUDE.md / AGENTS.md and skills/, mounted read-only (mount allowlist)',
    )
    .option('--harness-timeout <ms>', 'harnesses: time limit of one harness run (default 600000)')
    .option(
      '--instructions <text>',
      'anthropic/openai: system instructions (AGENT.md in the workspace is appended)',
    )
    .option(
      '--base-url <url>',
      'anthropic/openai: upstream base URL (default: ANTHROPIC_BASE_URL / OPENAI_BASE_URL on the host)',
    )
    .option('--secret <name>', 'anthropic/openai: host secret holding the key (default: the provider name)')
    .option('--tokens-per-hour <n>', 'anthropic/openai: model token budget per sliding hour')
    .option('--turns-per-hour <n>', 'anthropic/openai: model turn budget per sliding hour')
    .option('--json', 'print the agent as JSON')
    .action(
      async (
        name: string,
        o: {
          provider: string;
          image?: string;
          memory: string;
          cpus: string;
          pids: string;
          configDir?: string;
          harnessTimeout?: string;
          apt?: string;
          npm?: string;
          json?: boolean;
        } & ModelOptions,
      ) => {
        const created = await (await connect(env)).agents.create({
          name,
          provider: o.provider as ProviderName,
          ...(o.image ? { image: o.image } : {}),
          memoryMb: Number(o.memory),
          cpus: Number(o.cpus),
          pidsLimit: Number(o.pids),
          ...modelFields(o),
          ...(o.configDir ? { configDir: o.configDir } : {}),
          ...(o.harnessTimeout ? { harnessTimeoutMs: Number(o.harnessTimeout) } : {}),
          ...packagesOf(o),
        });
        if (o.json) printJson(created);
        else
          process.stdout.write(
            `agent ${created.name} created (provider ${created.provider}, ${created.memoryMb} MiB, ${created.cpus} CPU${created.image ? `, image ${created.image}` : ''})\n`,
          );
      },
    );
  agent
    .command('list')
    .description('List agents')
    .option('--json', 'print JSON')
    .action(async (o: { json?: boolean }) => {
      const agents = await (await connect(env)).agents.list();
      if (o.json) return printJson(agents);
      for (const a of agents)
        process.stdout.write(`${a.name}\t${a.provider}\t${a.memoryMb} MiB\t${a.cpus} CPU\n`);
    });
  agent
    .command('delete <name>')
    .description('Delete an agent no live session uses')
    .option('--json', 'print JSON')
    .action(async (name: string, o: { json?: boolean }) => {
      await (await connect(env)).agents.delete(name);
      if (o.json) return printJson({ deleted: name });
      process.stdout.write(`agent ${name} deleted\n`);
    });
  return agent;
}

/** --apt and --npm as the agent's `packages`; the API checks the names and the npm pins. */
function packagesOf(o: { apt?: string; npm?: string }): Record<string, unknown> {
  const apt = commaList(o.apt);
  const npm = commaList(o.npm);
  const packages = { ...(apt.length ? { apt } : {}), ...(npm.length ? { npm } : {}) };
  return Object.keys(packages).length ? { packages } : {};
}

interface ModelOptions {
  model?: string;
  instructions?: string;
  baseUrl?: string;
  secret?: string;
  tokensPerHour?: string;
  turnsPerHour?: string;
}

/** The model agent fields given on the command line; the API validates them. */
function modelFields(o: ModelOptions): Record<string, unknown> {
  const budget = {
    ...(o.tokensPerHour ? { tokensPerHour: Number(o.tokensPerHour) } : {}),
    ...(o.turnsPerHour ? { turnsPerHour: Number(o.turnsPerHour) } : {}),
  };
  return {
    ...(o.model ? { model: o.model } : {}),
    ...(o.instructions ? { instructions: o.instructions } : {}),
    ...(o.baseUrl ? { baseUrl: o.baseUrl } : {}),
    ...(o.secret ? { secret: o.secret } : {}),
    ...(Object.keys(budget).length ? { budget } : {}),
  };
}
