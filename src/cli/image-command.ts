// `berth image build|tag`: builds or names the sandbox base image `berth-base:<hash>`, or
// with --with/--apt/--npm/--agent an agent image `berth-agent:<hash>` (the base plus
// harnesses and packages).
//
// Invariants:
// - stdout carries only the result (one line, or one JSON object with --json) so scripts can
//   read it; progress and diagnostics go to stderr.
// - Docker and the cache directory are resolved lazily through `deps`, so `--help` and
//   `image tag` work without a running engine.

import { Command, Option } from 'commander';
import type Dockerode from 'dockerode';
import { type AgentImageNeeds, agentImageNeeds } from '../core/index.js';
import {
  type AgentImageWants,
  agentImageRecipe,
  agentImageTag,
  baseImageRecipe,
  baseImageTag,
  ensureAgentImage,
  ensureBaseImage,
} from '../image/index.js';
import { commaList } from './comma-list.js';
import { createProgress } from './progress.js';

export interface ImageCommandDeps {
  docker(): Promise<Dockerode>;
  cacheDir(): string;
  /** An agent of the running host (for --agent): what its image is built from. */
  agent(name: string): Promise<{ provider: string; packages?: { apt?: string[]; npm?: string[] } }>;
}

export function imageCommand(deps: ImageCommandDeps): Command {
  const image = new Command('image').description(
    'Build or name the base image every sandbox runs (berth-base:<hash>)',
  );

  image
    .command('build')
    .description('Build the base image unless an image with its tag already exists')
    .addOption(
      new Option('--from <source>', 'how to build it')
        .choices(['debootstrap', 'dockerfile'])
        .default('debootstrap'),
    )
    .option('--with <harnesses>', 'an agent image with these harnesses: claude-code,codex,opencode')
    .option(
      '--agent <name>',
      "the agent image of an agent of the running host: its provider's harness and its packages",
    )
    .option('--apt <packages>', 'an agent image with these Debian packages (comma-separated)')
    .option(
      '--npm <packages>',
      'an agent image with these npm packages, each name@exact-version (comma-separated)',
    )
    .option('--json', 'print {"tag","built","seconds"} as JSON on stdout')
    .addHelpText(
      'after',
      `
The tag is a hash of the recipe: Debian bookworm minbase + procps, the host's node
binary (${process.execPath}) and the recipe version. A new node binary therefore
means a new tag; an existing tag is never rebuilt.

Sources:
  debootstrap  (default) offline: runs debootstrap on this host against the Debian
               mirror from /etc/apt/sources*, adds the host's node, imports the root
               into Docker. Needs root and Debian's mirror, no container registry.
               Installs debootstrap with apt-get when it is missing. The first build
               takes a minute or two; later ones reuse the cached root in the cache dir.
  dockerfile   docker build of image/Dockerfile on node:20-bookworm-slim. Needs a
               reachable container registry and network inside build containers.

Agent images (--with, --apt, --npm, --agent): the base recipe plus each harness's
pinned npm packages (installed on this host from the npm registry, install scripts not
run) and Debian packages, and any more Debian and npm packages (an npm package names an
exact version: typescript@5.6.3; its executables are linked into /usr/local/bin and
NODE_PATH finds it), tagged berth-agent:<hash of all of it> and labelled with what it
holds. \`berth agent create NAME --provider claude-code [--apt …] [--npm …]\` uses the
image of its recipe.

Examples:
  berth image build
  berth image build --json | jq -r .tag
  berth image build --with claude-code,codex
  berth image build --agent cc          # the image agent cc needs: its harness and packages
  berth image build --with codex --apt git,ripgrep --npm typescript@5.6.3
  berth image build --apt jq            # no harness: a command or model agent's packages`,
    )
    .action(
      async (
        opts: AgentImageOptions & { from: 'debootstrap' | 'dockerfile'; agent?: string; json?: boolean },
      ) => {
        const startedAt = performance.now();
        const wants = mergeWants(
          wantsOf(opts),
          opts.agent ? agentImageNeeds(await deps.agent(opts.agent)) : null,
        );
        const progress = createProgress(wants ? 'berth-agent' : 'berth-base');
        let result: { tag: string; built: boolean };
        try {
          const onProgress = (p: Parameters<typeof progress.update>[0]) => progress.update(p);
          result = wants
            ? await ensureAgentImage(await deps.docker(), { cacheDir: deps.cacheDir(), ...wants, onProgress })
            : await ensureBaseImage(await deps.docker(), {
                cacheDir: deps.cacheDir(),
                from: opts.from,
                onProgress,
              });
        } catch (err) {
          progress.finish(`build failed after ${seconds(startedAt)} s`);
          throw err;
        }
        const secs = seconds(startedAt);
        progress.finish();
        if (opts.json) {
          process.stdout.write(
            `${JSON.stringify({ tag: result.tag, built: result.built, seconds: secs })}\n`,
          );
        } else {
          const how = result.built ? `built in ${secs.toFixed(1)} s` : 'up to date';
          process.stdout.write(`${result.tag} (${how})\n`);
        }
      },
    );

  image
    .command('tag')
    .description('Print the tag `image build` would produce for this host, without building')
    .option('--with <harnesses>', 'the agent image with these harnesses')
    .option('--apt <packages>', 'the agent image with these Debian packages')
    .option('--npm <packages>', 'the agent image with these npm packages (name@exact-version)')
    .addHelpText(
      'after',
      `
Hashes the host's node binary once; later calls read the hash from the cache dir.

Example:
  docker image inspect "$(berth image tag)"`,
    )
    .action(async (opts: AgentImageOptions) => {
      const wants = wantsOf(opts);
      const tag = wants
        ? agentImageTag(await agentImageRecipe(deps.cacheDir(), wants))
        : baseImageTag(await baseImageRecipe(deps.cacheDir()));
      process.stdout.write(`${tag}\n`);
    });

  return image;
}

interface AgentImageOptions {
  with?: string;
  apt?: string;
  npm?: string;
}

/** The agent image the options ask for, or null for the base image. */
function wantsOf(opts: AgentImageOptions): AgentImageWants | null {
  const wants = { harnesses: commaList(opts.with), apt: commaList(opts.apt), npm: commaList(opts.npm) };
  return wants.harnesses.length + wants.apt.length + wants.npm.length > 0 ? wants : null;
}

/** The options' wants and an agent's needs together; null when neither asks for anything. */
function mergeWants(a: AgentImageWants | null, b: AgentImageNeeds | null): AgentImageWants | null {
  if (!a || !b) return a ?? b;
  const both = (x: readonly string[] = [], y: readonly string[] = []) => [...x, ...y];
  return { harnesses: both(a.harnesses, b.harnesses), apt: both(a.apt, b.apt), npm: both(a.npm, b.npm) };
}

function seconds(startedAt: number): number {
  return Math.round((performance.now() - startedAt) / 100) / 10;
}
