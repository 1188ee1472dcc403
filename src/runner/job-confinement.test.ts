/** The job filter on this host's kernel: ptrace refused for the job and its children, all else as usual. */
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { confinedShellArgs, PERL } from './job-confinement.js';

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
