/**
 * mount(2) and umount2(2) for a process that has no binding to them (Node has none), on
 * the hot path of every turn. Spawning mount(8)/umount(8) costs ~9 ms and ~17 ms per call
 * here (a process start, then fstab/mtab work); the syscalls themselves take ~1.5 and ~3
 * ms. So one long-lived helper per process makes the calls: perl, which Debian always has
 * (perl-base is Essential) and whose built-in syscall() reaches any syscall by number. It
 * reads one request per line (`M source target fstype flags data` or `U target flags`, tab-separated; paths are berth's own and never hold a tab
 * or a newline) and answers each, in order, with `0` or the errno and its text.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { createInterface } from 'node:readline';

/** [mount, umount2] syscall numbers; other architectures use mount(8) instead. */
const SYSCALLS: Record<string, [number, number]> = { x64: [165, 166], arm64: [40, 39] };

export const MNT_DETACH = 2;
export const MS_NOSUID = 2;
export const MS_NODEV = 4;
export const ENOENT = 2;
export const EINVAL = 22;

const HELPER = String.raw`
$| = 1;
my ($SYS_MOUNT, $SYS_UMOUNT2) = @ARGV;
while (my $line = <STDIN>) {
  chomp $line;
  my ($op, @a) = split /\t/, $line, -1;
  my $r;
  if ($op eq 'M') { $r = syscall($SYS_MOUNT, my $s = $a[0], my $t = $a[1], my $f = $a[2], $a[3] + 0, my $d = $a[4]); }
  elsif ($op eq 'U') { $r = syscall($SYS_UMOUNT2, my $t = $a[0], $a[1] + 0); }
  else { $! = 22; $r = -1; }
  if ($r == 0) { print "0\n"; } else { printf "%d %s\n", $! + 0, "$!"; }
}
`;

export class SyscallError extends Error {
  constructor(
    readonly errno: number,
    message: string,
  ) {
    super(message);
  }
}

interface Pending {
  resolve(): void;
  reject(err: Error): void;
  what: string;
}

class MountHelper {
  private child: ChildProcessWithoutNullStreams | null = null;
  private readonly pending: Pending[] = [];

  constructor(private readonly numbers: [number, number]) {}

  call(fields: string[], what: string): Promise<void> {
    for (const f of fields)
      if (/[\t\n\0]/.test(f)) return Promise.reject(new Error(`${what}: a path holds a tab or newline`));
    const child = this.ensure();
    // Keeps the process alive only while an answer is due.
    if (this.pending.length === 0) (child.stdout as Socket).ref();
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject, what });
      child.stdin.write(`${fields.join('\t')}\n`);
    });
  }

  private ensure(): ChildProcessWithoutNullStreams {
    if (this.child) return this.child;
    const child = spawn('perl', ['-e', HELPER, ...this.numbers.map(String)], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    // Never keeps the process alive on its own.
    child.unref();
    for (const s of [child.stdin, child.stdout, child.stderr]) (s as unknown as Socket).unref();
    createInterface({ input: child.stdout }).on('line', (line) => {
      const p = this.pending.shift();
      if (!p) return;
      if (this.pending.length === 0) (child.stdout as Socket).unref();
      if (line === '0') return p.resolve();
      const space = line.indexOf(' ');
      p.reject(new SyscallError(Number(line.slice(0, space)), `${p.what}: ${line.slice(space + 1)}`));
    });
    const fail = (err: Error) => {
      if (this.child === child) this.child = null;
      for (const p of this.pending.splice(0))
        p.reject(new Error(`${p.what}: mount helper gone (${err.message})`));
    };
    child.on('error', fail);
    child.on('exit', (code, signal) => fail(new Error(`exit ${code ?? signal}`)));
    child.stdin.on('error', fail);
    this.child = child;
    return child;
  }
}

let helper: MountHelper | null | undefined;

/** The helper of this process, or null where the syscall numbers are unknown. */
export function mountHelper(): MountHelper | null {
  if (helper === undefined) {
    const numbers = SYSCALLS[process.arch];
    helper = numbers ? new MountHelper(numbers) : null;
  }
  return helper;
}

export type { MountHelper };
