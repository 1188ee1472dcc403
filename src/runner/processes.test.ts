/**
 * Jobs on this host's kernel (the runner's code, outside a sandbox): a job ends when its
 * main process exits, whatever it left holding its output; what it left is named and left
 * alive (the turn's end is what kills it); a job whose output closes with it ends as before.
 * Each test has a timeout: a job that waits for its output to close would hang it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { leftRunningOf, runShell, type ShellResult } from './processes.js';

const HANG_GUARD = { timeout: 30_000 };

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Kills what a job left, then removes its dir (in that order: a left process may still write there). */
function cleanUp(t: TestContext, cwd: string, result: () => ShellResult | undefined): void {
  t.after(async () => {
    for (const { pid } of result()?.leftRunning ?? []) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await rm(cwd, { recursive: true, force: true, maxRetries: 5 });
  });
}

/** Runs `command` in a temp dir; every process it leaves is killed after the test. */
async function job(t: TestContext, command: string): Promise<ShellResult> {
  const cwd = await mkdtemp(join(tmpdir(), 'berth-jobs-'));
  let result: ShellResult | undefined;
  cleanUp(t, cwd, () => result);
  result = await runShell(command, { cwd, maxOutputBytes: 1 << 20, attempt: 1 });
  return result;
}

test(
  'a background process holding the output does not hold the job: (tail -f /dev/null &); echo hi',
  HANG_GUARD,
  async (t) => {
    const r = await job(t, '(tail -f /dev/null &); echo hi');
    assert.equal(r.stdout, 'hi\n');
    assert.equal(r.exitCode, 0);
    assert.deepEqual(
      r.leftRunning.map((p) => p.command),
      ['tail -f /dev/null'],
    );
    assert.ok(alive(r.leftRunning[0]!.pid), 'left running, not killed by the job');
  },
);

test('sleep 1000 & echo started: the output, the exit code, and the sleep named', HANG_GUARD, async (t) => {
  const r = await job(t, 'sleep 1000 & echo started; exit 3');
  assert.deepEqual([r.stdout, r.stderr, r.exitCode, r.timedOut], ['started\n', '', 3, false]);
  assert.deepEqual(
    r.leftRunning.map((p) => p.command),
    ['sleep 1000'],
  );
});

test('everything the main process wrote before it exited is read, however much', HANG_GUARD, async (t) => {
  const r = await job(t, "(sleep 1000 &); head -c 200000 /dev/zero | tr '\\0' x; echo; echo end >&2");
  assert.equal(r.stdout, `${'x'.repeat(200_000)}\n`);
  assert.equal(r.stderr, 'end\n');
});

test('a process that left the job’s group but kept its output is named too', HANG_GUARD, async (t) => {
  const r = await job(t, 'setsid sleep 1001 & echo detached');
  assert.equal(r.stdout, 'detached\n');
  assert.deepEqual(
    r.leftRunning.map((p) => p.command),
    ['sleep 1001'],
  );
});

test(
  'a background process with its output redirected: the job ends with its shell, as before, and it is named',
  HANG_GUARD,
  async (t) => {
    const r = await job(t, 'sleep 1002 > /dev/null 2>&1 & echo $!');
    assert.equal(r.exitCode, 0);
    const pid = Number(r.stdout.trim());
    assert.deepEqual(r.leftRunning, [{ pid, command: 'sleep 1002' }]);
    assert.ok(alive(pid));
  },
);

test('a job that leaves nothing behind leaves nothing named', HANG_GUARD, async (t) => {
  const r = await job(t, 'echo one; sleep 0.1 | cat; echo two >&2');
  assert.deepEqual([r.stdout, r.stderr, r.leftRunning], ['one\n', 'two\n', []]);
});

test(
  'output a left process writes after the job ended is read and dropped: it neither blocks nor counts',
  HANG_GUARD,
  async (t) => {
    const cwd = await mkdtemp(join(tmpdir(), 'berth-jobs-'));
    let r: ShellResult | undefined;
    cleanUp(t, cwd, () => r);
    // Waits for the job to have returned, then writes 16 KiB at a time, counting.
    const writer =
      'while [ ! -e go ]; do sleep 0.05; done; i=0; while :; do head -c 16384 /dev/zero; i=$((i+1)); echo $i > count; done';
    r = await runShell(`(${writer}) & echo started`, { cwd, maxOutputBytes: 4096, attempt: 1 });
    assert.equal(r.stdout, 'started\n');
    await writeFile(join(cwd, 'go'), '');
    // 4 MiB: far past the output limit, and past any socket buffer a writer nobody reads would block on.
    let written = 0;
    for (let i = 0; i < 600 && written < 256; i++) {
      await new Promise((done) => setTimeout(done, 50));
      written = Math.max(written, Number(await readFile(join(cwd, 'count'), 'utf8').catch(() => 0)));
    }
    assert.ok(written >= 256, `the writer stopped after ${written} chunks`);
  },
);

test('leftRunningOf: killed at the turn’s end, or kept by a resident agent; nothing when none was left', () => {
  const left = [{ pid: 7, command: 'sleep 9' }];
  assert.deepEqual(leftRunningOf(left, false), { processes: left, fate: 'killed-at-turn-end' });
  assert.deepEqual(leftRunningOf(left, true), { processes: left, fate: 'kept-resident' });
  assert.equal(leftRunningOf([], true), undefined);
});

test(
  'an exec’s job: its output heard as it comes, in order within each stream; an abort kills its whole group',
  HANG_GUARD,
  async (t) => {
    const cwd = await mkdtemp(join(tmpdir(), 'berth-job-'));
    t.after(() => rm(cwd, { recursive: true, force: true }));
    const heard: string[] = [];
    const gone = new AbortController();
    const { signal, leftRunning } = await runShell(
      'echo one; echo two >&2; sleep 1000 & echo $! > child.pid; echo started; wait',
      {
        cwd,
        maxOutputBytes: 1024,
        attempt: 0,
        onOutput: (stream, chunk) => {
          heard.push(`${stream}:${chunk.toString()}`);
          if (chunk.toString().includes('started')) gone.abort();
        },
        signal: gone.signal,
      },
    );
    // In order within a stream; the two pipes are read apart, so not across them.
    const of = (stream: string) =>
      heard.filter((h) => h.startsWith(`${stream}:`)).map((h) => h.slice(stream.length + 1));
    assert.deepEqual([of('stdout').join(''), of('stderr').join('')], ['one\nstarted\n', 'two\n']);
    assert.equal(signal, 'SIGKILL');
    assert.deepEqual(leftRunning, []);
    const child = Number(await readFile(join(cwd, 'child.pid'), 'utf8'));
    // Killed, it may linger a moment as a zombie until its new parent reaps it.
    const dead = async () =>
      !alive(child) || /\) Z /.test(await readFile(`/proc/${child}/stat`, 'utf8').catch(() => ''));
    for (let i = 0; i < 50 && !(await dead()); i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(await dead(), 'the sleep in its group was killed with it');
  },
);
