// `berth image build|tag`: builds or names the sandbox base image `berth-base:<hash>`, or
// with --with an agent image `berth-agent:<hash>` (the base plus harnesses).
//
// Invariants:
// - stdout carries only the result (one line, or one JSON object with --json) so scripts can
//   read it; progress and diagnostics go to stderr.
// - Docker and the cache directory are resolved lazily through `deps`, so `--help` and
//   `image tag` work without a running engine.

import { Command, Option } from 'commander';
import type Dockerode from 'dockerode';
import {
  agentImageRecipe,
  agentImageTag,
  baseImageRecipe,
  baseImageTag,
  ensureAgentImage,
  ensureBaseImage,
} from '../image/index.js';
import { createProgress } from './progress.js';

export interface ImageCommandDeps {
  docker(): Dockerode;
  cacheDir(): string;
  /** The provider of an agent of the running host (for --agent). */
  agentProvider(name: string): Promise<string>;
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
    .option('--agent <name>', "the agent image for an agent of the running host: its provider's harness")
    .option('--apt <packages>', 'with --with: more Debian packages for the agent image (comma-separated)')
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

Agent images (--with): the base recipe plus each harness's pinned npm packages
(installed on this host from the npm registry, install scripts not run) and Debian
packages, tagged berth-agent:<hash of all of it> and labelled berth.harnesses.
\`berth agent create NAME --provider claude-code\` uses the image for its harness.

Examples:
  berth image build
  berth image build --json | jq -r .tag
  berth image build --with claude-code,codex
  berth image build --agent cc          # the image agent cc's provider needs
  berth image build --with codex --apt git,ripgrep`,
    )
    .action(
      async (opts: {
        from: 'debootstrap' | 'dockerfile';
        with?: string;
        agent?: string;
        apt?: string;
        json?: boolean;
      }) => {
        const startedAt = performance.now();
        const harnesses = [...list(opts.with), ...(opts.agent ? [await deps.agentProvider(opts.agent)] : [])];
        const progress = createProgress(harnesses.length ? 'berth-agent' : 'berth-base');
        let result: { tag: string; built: boolean };
        try {
          const onProgress = (p: Parameters<typeof progress.update>[0]) => progress.update(p);
          result = harnesses.length
            ? await ensureAgentImage(deps.docker(), {
                cacheDir: deps.cacheDir(),
                harnesses,
                apt: list(opts.apt),
                onProgress,
              })
            : await ensureBaseImage(deps.docker(), {
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
    .option('--apt <packages>', 'with --with: more Debian packages')
    .addHelpText(
      'after',
      `
Hashes the host's node binary once; later calls read the hash from the cache dir.

Example:
  docker image inspect "$(berth image tag)"`,
    )
    .action(async (opts: { with?: string; apt?: string }) => {
      const harnesses = list(opts.with);
      const tag = harnesses.length
        ? agentImageTag(await agentImageRecipe(deps.cacheDir(), harnesses, list(opts.apt)))
        : baseImageTag(await baseImageRecipe(deps.cacheDir()));
      process.stdout.write(`${tag}\n`);
    });

  return image;
}

function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

function seconds(startedAt: number): number {
  return Math.round((performance.now() - startedAt) / 100) / 10;
}
