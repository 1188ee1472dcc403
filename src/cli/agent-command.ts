/**
 * `berth agent create|update|apply|show|list|delete`. create and update take one flag per
 * field (agent-flags.ts); apply and show move the whole spec as a file (agent-file.ts).
 * A session keeps the agent config its worker read when it claimed the session for the
 * sandbox it runs in; a change reaches it with its next sandbox (docs/config.md, Agents).
 */
import { Command, Option } from 'commander';
import {
  type Agent,
  type AgentPatch,
  type AgentSpecInput,
  agentSpecOf,
  diffAgentSpecs,
  issueLine,
} from '../core/index.js';
import {
  type AgentFileFormat,
  agentFileIssues,
  changeLines,
  formatAgentSpec,
  readAgentFile,
} from './agent-file.js';
import { addAgentFlags, specFromFlags } from './agent-flags.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

function summary(a: Agent): string {
  const extras = [
    a.isolation === 'runsc' ? 'gVisor' : '',
    a.mode === 'resident' ? 'resident' : '',
    a.egress.length ? `egress ${a.egress.length}` : '',
    a.mounts.length ? `mounts ${a.mounts.length}` : '',
    a.image ? `image ${a.image}` : '',
  ].filter(Boolean);
  return `provider ${a.provider}, ${a.memoryMb} MiB, ${a.cpus} CPU${extras.length ? `, ${extras.join(', ')}` : ''}`;
}

export function agentCommand(env: NodeJS.ProcessEnv): Command {
  const agent = new Command('agent').description(
    'Create, change and inspect agents (named sandbox configurations)',
  );
  addAgentFlags(agent.command('create <name>').description('Create an agent'), 'create')
    .option('--json', 'print the agent as JSON')
    .action(async (name: string, o: Record<string, unknown>) => {
      const created = await (await connect(env)).agents.create({
        ...specFromFlags(o),
        name,
      } as AgentSpecInput);
      if (o.json) printJson(created);
      else process.stdout.write(`agent ${created.name} created (${summary(created)})\n`);
    });
  addAgentFlags(
    agent
      .command('update <name>')
      .description(
        'Change the fields given (a list flag replaces the whole list); the rest stays. Its sessions use it from their next sandbox',
      ),
    'update',
  )
    .option('--json', 'print the agent as JSON')
    .action(async (name: string, o: Record<string, unknown>) => {
      // Shaped by the flags, checked by the API (the same errors as over HTTP).
      const patch = specFromFlags(o) as AgentPatch;
      const berth = await connect(env);
      const before = await berth.agents.show(name);
      const updated = await berth.agents.update(name, patch);
      if (o.json) return printJson(updated);
      const changes = diffAgentSpecs(before, agentSpecOf(updated));
      process.stdout.write(
        changes.length
          ? `agent ${name} updated:\n${changeLines(changes).join('\n')}\n`
          : `agent ${name} unchanged\n`,
      );
    });
  agent
    .command('apply')
    .description(
      'Create the agent a file describes, or replace its whole spec (left-out fields take their defaults); prints what changed',
    )
    .requiredOption('-f, --file <file>', 'YAML or JSON agent file, exactly the API agent schema (- = stdin)')
    .option('--json', 'print {agent, created, changes} as JSON')
    .action(async (o: { file: string; json?: boolean }) => {
      const content = await readAgentFile(o.file);
      const issues = agentFileIssues(content);
      if (issues.length) {
        for (const issue of issues)
          process.stderr.write(`berth: ${o.file}: ${issueLine(issue)}. Fix: ${issue.fix}\n`);
        process.exit(2);
      }
      const applied = await (await connect(env)).agents.apply(content as AgentSpecInput);
      if (o.json) return printJson(applied);
      const name = applied.agent.name;
      if (applied.created) process.stdout.write(`agent ${name} created (${summary(applied.agent)})\n`);
      else if (applied.changes.length === 0) process.stdout.write(`agent ${name} unchanged\n`);
      else process.stdout.write(`agent ${name} updated:\n${changeLines(applied.changes).join('\n')}\n`);
    });
  agent
    .command('show <name>')
    .description("Print the agent's whole spec as a file `berth agent apply -f` takes back unchanged")
    .addOption(new Option('-o, --output <format>', 'file format').choices(['yaml', 'json']).default('yaml'))
    .action(async (name: string, o: { output: AgentFileFormat }) => {
      const spec = await (await connect(env)).agents.show(name);
      process.stdout.write(formatAgentSpec(spec, o.output));
    });
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
