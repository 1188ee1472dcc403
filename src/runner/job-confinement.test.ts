/** The job filter on this host's kernel: ptrace refused for the job and its children, all else as usual. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { confinedShellArgs, OUTPUT_REPORT_FD, PERL } from './job-confinement.js';

const PTRACE_ATTACH = (pid: number) =>
  `perl -MConfig -e '$!=0; my $r = syscall($Config{archname} =~ /aarch64/ ? 117 : 101, 16, ${pid}, 0, 0);` +
  ` print $r == -1 ? $!+0 : 0'`;

test('a confined job (and what it forks) cannot ptrace; its exit code, output and other syscalls are untouched', (t) => {
  const target = spawn('sleep', ['30']);
  t.after(() => target.kill());
  const run = (command: string) => spawnSync(PERL, confinedShellArgs(command), { encoding: 'utf8' });

  assert.equal(
    spawnSync('/bin/sh', ['-c', PTRACE_ATTACH(target.pid!)], { encoding: 'utf8' }).stdout,
    '0',
    'unconfined, root may attach',
  );
  spawnSync('kill', ['-CONT', String(target.pid)]); // detach happens when that prober exits
  assert.equal(run(PTRACE_ATTACH(target.pid!)).stdout, '1', 'EPERM');
  assert.equal(run(`true | ${PTRACE_ATTACH(target.pid!)}`).stdout, '1', 'a forked child inherits it');
  const plain = run('echo out; echo err >&2; exit 7');
  assert.deepEqual([plain.status, plain.stdout, plain.stderr], [7, 'out\n', 'err\n']);
});

test('the wrapper reports where the job’s stdout and stderr lead on OUTPUT_REPORT_FD, which the job never sees', () => {
  const stdio = ['ignore', 'pipe', 'pipe', 'pipe'] as const;
  const run = spawnSync(
    PERL,
    confinedShellArgs('test -e /proc/$$/fd/3 && echo fd3-open || echo fd3-closed'),
    {
      encoding: 'utf8',
      stdio: [...stdio],
    },
  );
  assert.equal(run.stdout, 'fd3-closed\n');
  const report = String(run.output[OUTPUT_REPORT_FD]).split('\n');
  assert.equal(report.length, 3, JSON.stringify(report));
  assert.match(report[0]!, /^(socket|pipe):\[\d+\]$/);
  assert.match(report[1]!, /^(socket|pipe):\[\d+\]$/);
  assert.notEqual(report[0], report[1]);
  // Without the fd the wrapper writes nothing anywhere and the job runs as ever.
  assert.deepEqual(spawnSync(PERL, confinedShellArgs('echo ok'), { encoding: 'utf8' }).stdout, 'ok\n');
});
