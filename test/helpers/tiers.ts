/**
 * The isolation tiers a test can run on this machine: runc always; runsc (gVisor) when
 * the engine has it registered (scripts/ensure-runsc.sh, run by the set-up). A tier that
 * is missing is skipped with the reason, never faked.
 */
import { connectDocker } from '../../src/runtime/index.js';

export type Tier = 'runc' | 'runsc';

export async function availableTiers(): Promise<{ tier: Tier; skip: string | false }[]> {
  const info = (await connectDocker('/var/run/docker.sock').info()) as { Runtimes?: Record<string, unknown> };
  const runsc = info.Runtimes?.runsc !== undefined;
  return [
    { tier: 'runc', skip: false },
    {
      tier: 'runsc',
      skip: runsc
        ? false
        : "needs the gVisor tier: runsc registered with Docker (as root, make setup runs scripts/ensure-runsc.sh, which installs Debian's runsc)",
    },
  ];
}
