/**
 * `berth files ls|stat|get|put|rm|mkdir|mv SESSION PATH…`: the files of a session's live
 * sandbox, as it sees them now (`berth session files` reads the committed history). A path
 * is relative to the workspace or absolute under /workspace; `get` and `put` stream, with
 * `-` for stdout or stdin.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Command } from 'commander';
import type { SandboxFileEntry } from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';

function entryLine(e: SandboxFileEntry): string {
  const kind = { file: '-', dir: 'd', symlink: 'l', other: '?' }[e.type];
  const when = new Date(e.mtimeMs).toISOString().slice(0, 19).replace('T', ' ');
  return `${kind}${e.mode.toString(8).padStart(4, '0')}  ${String(e.size).padStart(10)}  ${when}  ${e.name}${e.type === 'dir' ? '/' : ''}`;
}

export function filesCommand(env: NodeJS.ProcessEnv): Command {
  const files = async () => (await connect(env)).sessions.sandboxFiles;
  const cmd = new Command('files')
    .description("The files of a session's live sandbox (a resident agent's keeps one between turns)")
    .addHelpText(
      'after',
      `
Paths are relative to the workspace (src/a.ts) or absolute under /workspace; nothing outside
it is reachable, not even through a symlink (PATH_OUTSIDE_WORKSPACE). A write is atomic and
counted against the agent's workspaceMb (WORKSPACE_QUOTA_EXCEEDED leaves nothing). A session
with no sandbox bound now (an ephemeral one between turns) is NO_LIVE_SANDBOX.
Examples:
  berth files ls s1 src
  berth files get s1 out/report.pdf report.pdf
  berth files put s1 ./data.csv input/data.csv --mkdirs
  echo hi | berth files put s1 - note.txt`,
    );
  cmd
    .command('ls')
    .description('List a directory (default: the workspace root): mode, size, modification time, name')
    .argument('<session>', 'session id')
    .argument('[path]', 'directory', '')
    .option('--json', 'print the entries as JSON')
    .action(async (sessionId: string, path: string, o: { json?: boolean }) => {
      const listed = await (await files()).list(sessionId, path);
      if (o.json) return printJson(listed);
      for (const e of listed.entries) process.stdout.write(`${entryLine(e)}\n`);
      if (listed.omitted > 0)
        process.stderr.write(`berth: ${listed.omitted} name(s) that are not UTF-8 not shown\n`);
    });
  cmd
    .command('stat')
    .description('One path: type, size, mtimeMs and mode, as JSON (a symlink is reported, not followed)')
    .argument('<session>', 'session id')
    .argument('<path>', 'path')
    .action(async (sessionId: string, path: string) =>
      printJson(await (await files()).stat(sessionId, path)),
    );
  cmd
    .command('get')
    .description("Copy a file out of the sandbox, streamed (to a local file, or stdout when '-' or left out)")
    .argument('<session>', 'session id')
    .argument('<path>', 'file in the sandbox')
    .argument('[local]', "local file ('-': stdout)", '-')
    .action(async (sessionId: string, path: string, local: string) => {
      const body = await (await files()).readStream(sessionId, path);
      const out = local === '-' ? process.stdout : createWriteStream(local);
      await pipeline(Readable.fromWeb(body as Parameters<typeof Readable.fromWeb>[0]), out as Writable);
    });
  cmd
    .command('put')
    .description(
      "Copy a local file (or stdin, '-') into the sandbox, streamed; created or replaced atomically",
    )
    .argument('<session>', 'session id')
    .argument('<local>', "local file ('-': stdin)")
    .argument('<path>', 'file in the sandbox')
    .option('--mkdirs', 'make missing parent directories')
    .action(async (sessionId: string, local: string, path: string, o: { mkdirs?: boolean }) => {
      const body = local === '-' ? process.stdin : createReadStream(local);
      printJson(await (await files()).write(sessionId, path, body, { mkdirs: o.mkdirs ?? false }));
    });
  cmd
    .command('rm')
    .description('Remove a file, a symlink (not its target), or a directory')
    .argument('<session>', 'session id')
    .argument('<path>', 'path')
    .option('-r, --recursive', 'remove a non-empty directory and everything in it')
    .action(async (sessionId: string, path: string, o: { recursive?: boolean }) =>
      (await files()).remove(sessionId, path, { recursive: o.recursive ?? false }),
    );
  cmd
    .command('mkdir')
    .description('Make a directory')
    .argument('<session>', 'session id')
    .argument('<path>', 'directory')
    .option('-p, --parents', 'make missing parents too; an existing directory is fine')
    .action(async (sessionId: string, path: string, o: { parents?: boolean }) => {
      printJson(await (await files()).makeDir(sessionId, path, { parents: o.parents ?? false }));
    });
  cmd
    .command('mv')
    .description('Move (rename) a path; a file at the destination is replaced')
    .argument('<session>', 'session id')
    .argument('<from>', 'path')
    .argument('<to>', 'path')
    .action(async (sessionId: string, from: string, to: string) => {
      printJson(await (await files()).rename(sessionId, from, to));
    });
  return cmd;
}
