/**
 * `berth session history|diff|files`: a session's turns as a table, what one committed
 * turn changed as a unified diff (coloured on a terminal, plain otherwise or with
 * NO_COLOR), and the workspace as of any retained version (a directory listed, a file
 * printed as it is).
 */
import { type Command, InvalidArgumentError } from 'commander';
import {
  type FileChange,
  formatBytes,
  oneLine,
  type Turn,
  type TurnDiff,
  type WorkspaceSummary,
} from '../core/index.js';
import { connect } from './connect.js';
import { printJson } from './output.js';
import { table } from './status-command.js';

export function addHistoryCommands(session: Command, env: NodeJS.ProcessEnv): void {
  session
    .command('history <id>')
    .description(
      "A session's turns, oldest first: the workspace version each commit made, status (an aborted attempt's code), messages, start, duration and attempt",
    )
    .option('--json', 'print JSON')
    .addHelpText(
      'after',
      '\nThen: berth session diff <id> <version|turn> for what a turn changed, berth session files <id> --version <n> for the files it left.',
    )
    .action(async (id: string, o: { json?: boolean }) => {
      const berth = await connect(env);
      const [turns, workspace] = await Promise.all([berth.sessions.turns(id), berth.sessions.workspace(id)]);
      if (o.json) return printJson(turns);
      process.stdout.write(`${turns.length ? renderHistory(turns) : `session ${id} has no turns yet`}\n`);
      process.stdout.write(`${renderWorkspaceSummary(workspace)}\n`);
    });
  session
    .command('diff')
    .argument('<id>', 'the session')
    .argument(
      '<turn>',
      'the workspace version its commit made (berth session history), or its turn id',
      turnRef,
    )
    .description(
      'What a committed turn changed in the workspace, as a unified diff: <turn> is the workspace version its commit made (from berth session history) or its turn id',
    )
    .option('--json', 'print JSON (every file with its sizes, modes, hashes and text diff)')
    .option('--color', 'colour the diff even when the output is not a terminal')
    .option('--no-color', 'never colour the diff')
    .addHelpText(
      'after',
      '\nBinary files show their sizes; a file over 1 MiB, or the files after 2 MiB of diff, show sizes and are marked truncated (read them with berth session files).\n\nExample:\n  berth session diff main 3',
    )
    .action(async (id: string, turn: string, o: { json?: boolean; color?: boolean }) => {
      const diff = await (await connect(env)).sessions.diff(id, turn);
      if (o.json) return printJson(diff);
      const color = o.color ?? (process.stdout.isTTY === true && !env.NO_COLOR);
      process.stdout.write(renderDiff(diff, color));
    });
  session
    .command('files <id> [path]')
    .description(
      "The session's workspace as of a version: lists a directory (the root by default) or prints a file's bytes",
    )
    .option('--version <n>', 'the workspace version (default: the current one)', versionNumber)
    .option('--json', 'print JSON (a file: its size and mode, and its content as base64)')
    .addHelpText(
      'after',
      '\nExamples:\n  berth session files main --version 2\n  berth session files main src/app.js --version 2 > app-v2.js',
    )
    .action(async (id: string, path: string | undefined, o: { version?: number; json?: boolean }) => {
      const entry = await (await connect(env)).sessions.files(id, { version: o.version, path });
      if (o.json)
        return printJson(
          entry.type === 'file' ? { ...entry, content: entry.content.toString('base64') } : entry,
        );
      switch (entry.type) {
        case 'file':
          process.stdout.write(entry.content);
          return;
        case 'link':
          process.stdout.write(`${entry.path} -> ${entry.target}\n`);
          return;
        case 'dir': {
          const rows = entry.entries.map((e) => [
            modeString(e.type, e.mode),
            e.type === 'file' ? String(e.size) : '-',
            e.type === 'dir' ? `${e.name}/` : e.type === 'link' ? `${e.name} -> ${e.target}` : e.name,
          ]);
          process.stdout.write(
            `${table(['MODE', 'SIZE', `NAME (version ${entry.version}${entry.path ? `, ${entry.path}/` : ''})`], rows)}\n`,
          );
        }
      }
    });
}

export function turnRef(value: string): string {
  if (!/^(\d+|turn_[A-Za-z0-9_-]+)$/.test(value))
    throw new InvalidArgumentError(
      'give the workspace version its commit made (a number) or its turn id (turn_…), as berth session history lists them',
    );
  return value;
}

export function versionNumber(value: string): number {
  if (!/^\d+$/.test(value))
    throw new InvalidArgumentError('a workspace version is a whole number ≥ 0 (see berth session history)');
  return Number(value);
}

export function renderHistory(turns: Turn[]): string {
  const rows = turns.map((t) => [
    t.status === 'committed' && t.baseVersion !== null ? String(t.baseVersion + 1) : '-',
    t.status === 'aborted' ? `aborted ${t.errorCode ?? ''}`.trim() : t.status,
    t.messageIds.map((m) => `#${m}`).join(' '),
    new Date(t.startedAt).toISOString().replace('T', ' ').slice(0, 19),
    t.endedAt === null ? 'running' : `${t.endedAt - t.startedAt} ms`,
    String(t.attempt),
    t.id,
    t.error ? oneLine(t.error, 50) : '',
  ]);
  return table(
    ['VERSION', 'STATUS', 'MESSAGES', 'STARTED (UTC)', 'DURATION', 'ATTEMPT', 'TURN', 'ERROR'],
    rows,
  );
}

/** One line under the history: the versions kept, the policy, and the bytes in the blob store. */
export function renderWorkspaceSummary(w: WorkspaceSummary): string {
  const kept = w.retained
    ? w.retained.oldest === w.retained.newest
      ? `version ${w.retained.newest} retained`
      : `versions ${w.retained.oldest}-${w.retained.newest} retained`
    : 'no versions (written in place)';
  const r = w.retention;
  const policy = !r
    ? 'since the newest snapshot'
    : r.all
      ? 'every version'
      : r.versions !== undefined
        ? `the last ${r.versions}`
        : `every version of the last ${r.days} days`;
  const rewinds = w.rewinds.map((r) => `\nversion ${r.version}: rewound to version ${r.toVersion}`).join('');
  return `workspace: version ${w.version}, ${kept} (retention: ${policy}); ${w.objects} object${w.objects === 1 ? '' : 's'}, ${bytesOf(w.bytes)} in the blob store${rewinds}`;
}

function bytesOf(n: number): string {
  return n < 1024 ? formatBytes(n) : `${formatBytes(n)} (${n} bytes)`;
}

const COLORS = { bold: '\x1b[1m', red: '\x1b[31m', green: '\x1b[32m', cyan: '\x1b[36m', reset: '\x1b[0m' };

/** The diff as `git diff` prints one, each file with its header; sizes for a binary or truncated file. */
export function renderDiff(
  diff: TurnDiff & { turnId: string | null; rewoundTo?: number },
  color: boolean,
): string {
  const paint = (c: keyof typeof COLORS, s: string) => (color ? `${COLORS[c]}${s}${COLORS.reset}` : s);
  const out: string[] = [];
  for (const f of diff.files) {
    const from = f.from ?? f.path;
    out.push(paint('bold', `diff --berth a/${from} b/${f.path}`));
    if (f.change === 'renamed')
      out.push(paint('bold', `rename from ${from}`), paint('bold', `rename to ${f.path}`));
    if (f.before && f.after && f.before.mode !== f.after.mode)
      out.push(paint('bold', `old mode ${modeOf(f.before)}`), paint('bold', `new mode ${modeOf(f.after)}`));
    if (f.change === 'added') out.push(paint('bold', `new file mode ${modeOf(f.after!)}`));
    if (f.change === 'deleted') out.push(paint('bold', `deleted file mode ${modeOf(f.before!)}`));
    const note = noteOf(f);
    if (note) {
      out.push(note);
      continue;
    }
    if (!f.diff) continue;
    out.push(
      paint('bold', `--- ${f.before ? `a/${from}` : '/dev/null'}`),
      paint('bold', `+++ ${f.after ? `b/${f.path}` : '/dev/null'}`),
    );
    for (const line of f.diff.replace(/\n$/, '').split('\n'))
      out.push(
        line.startsWith('@@')
          ? paint('cyan', line)
          : line.startsWith('+')
            ? paint('green', line)
            : line.startsWith('-')
              ? paint('red', line)
              : line,
      );
  }
  const c = diff.counts;
  const total = diff.files.length;
  out.push(
    `version ${diff.version} (${diff.turnId === null ? `rewind to version ${diff.rewoundTo}` : `turn ${diff.turnId}`}): ${total} file${total === 1 ? '' : 's'} changed — ${c.added} added, ${c.modified} modified, ${c.deleted} deleted, ${c.renamed} renamed${diff.truncated ? '; some text diffs left out (truncated)' : ''}`,
  );
  return `${out.join('\n')}\n`;
}

/** Why a file shows no text: a link, binary content, or past the bounds. */
function noteOf(f: FileChange): string | null {
  const sizes = `${f.before ? `${f.before.size} bytes` : 'none'} -> ${f.after ? `${f.after.size} bytes` : 'none'}`;
  if (f.before?.type === 'link' || f.after?.type === 'link')
    return `symbolic link: ${f.before?.target ?? '(none)'} -> ${f.after?.target ?? '(none)'}`;
  if (f.binary) return `Binary files differ (${sizes})`;
  if (f.truncated) return `Text diff left out (truncated: ${sizes})`;
  return null;
}

function modeOf(side: { type: 'file' | 'link'; mode: number }): string {
  return `${side.type === 'link' ? '120' : '100'}${side.mode.toString(8).padStart(3, '0')}`;
}

function modeString(type: 'dir' | 'file' | 'link', mode: number): string {
  const bits = 'rwxrwxrwx'
    .split('')
    .map((ch, i) => (mode & (1 << (8 - i)) ? ch : '-'))
    .join('');
  return `${type === 'dir' ? 'd' : type === 'link' ? 'l' : '-'}${bits}`;
}
