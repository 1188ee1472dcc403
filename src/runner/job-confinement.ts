/**
 * Every job the runner starts runs under a seccomp filter that refuses ptrace (EPERM), on
 * top of Docker's default profile (filters stack; the strictest answer wins). Jobs, the
 * runner and the init all run as the sandbox user, so without it a job could attach to
 * the runner and rewrite its heartbeats or its view of the next turn (docs/security.md,
 * case 10). The runner itself stays unfiltered and needs no ptrace.
 *
 * The filter is installed by perl (perl-base is Essential on Debian, so it is in every
 * berth image) through prctl(PR_SET_SECCOMP), then perl execs the job: a filter cannot
 * be removed, and every process the job forks inherits it. No native code ships into the
 * sandbox. The classic-BPF program checks the architecture first, so a 32-bit (i386,
 * arm) or x32 ptrace call is refused too. The wrapper also tells the runner where the
 * job's output leads (OUTPUT_REPORT_FD). Node built-ins only; ships into the sandbox.
 */

/**
 * When the runner opens this fd for a job, the wrapper writes on it, one per line, where
 * the job's stdout and stderr lead (`socket:[…]`, as /proc/<pid>/fd shows them), then
 * closes it before the exec: the job never sees it. Any process holding those later holds
 * the job's output (processes.ts); read from the wrapper, the answer cannot race a job
 * that exits at once.
 */
export const OUTPUT_REPORT_FD = 3;

/** seccomp_data: nr at offset 0, arch at offset 4. AUDIT_ARCH_* and each ABI's ptrace number. */
const CONFINE_SCRIPT = `
my $prctl = shift @ARGV;
my @f = (
  [0x20,0,0,4],            # A = arch
  [0x15,0,3,0xc000003e],   # x86_64?
  [0x20,0,0,0],            #   A = nr
  [0x15,9,0,101],          #   ptrace -> deny
  [0x15,8,7,0x40000209],   #   x32 ptrace -> deny, else allow
  [0x15,0,2,0xc00000b7],   # aarch64?
  [0x20,0,0,0],            #   A = nr
  [0x15,5,4,117],          #   ptrace -> deny, else allow
  [0x15,1,0,0x40000003],   # i386?
  [0x15,0,2,0x40000028],   # arm?
  [0x20,0,0,0],            #   A = nr
  [0x15,1,0,26],           #   ptrace -> deny
  [0x06,0,0,0x7fff0000],   # allow
  [0x06,0,0,0x00050001]);  # deny: errno EPERM
my $prog = join "", map { pack "SCCL", @$_ } @f;
my $fprog = pack "S x6 Q", scalar(@f), unpack("Q", pack("p", $prog));
syscall($prctl, 38, 1, 0, 0, 0) == 0 or die "berth: cannot confine the job (no_new_privs): $!\\n";
syscall($prctl, 22, 2, $fprog) == 0 or die "berth: cannot confine the job (seccomp): $!\\n";
if (open(my $report, ">&=", ${OUTPUT_REPORT_FD})) {
  print $report join("\\n", map { readlink("/proc/self/fd/$_") // "" } 1, 2), "\\n";
  close $report;
}
exec { $ARGV[0] } @ARGV or die "berth: cannot start $ARGV[0]: $!\\n";
`;

export const PERL = '/usr/bin/perl';

/** prctl's number per architecture (the runner's own: jobs run on the same kernel); perl's Config costs 5 ms a job. */
const PRCTL_NR: Partial<Record<NodeJS.Architecture, number>> = { x64: 157, arm64: 167 };

/** The argv that runs `command` under /bin/sh -c, confined: spawn(PERL, confinedShellArgs(command)). */
export function confinedShellArgs(command: string): string[] {
  return confinedArgs(['/bin/sh', '-c', command]);
}

/** The argv that runs a program (argv[0], an absolute path) confined: spawn(PERL, confinedArgs(argv)). */
export function confinedArgs(argv: string[]): string[] {
  const prctl = PRCTL_NR[process.arch];
  if (prctl === undefined)
    throw new Error(`berth cannot confine jobs on ${process.arch}: only x64 and arm64 are supported`);
  return ['-e', CONFINE_SCRIPT, String(prctl), ...argv];
}
