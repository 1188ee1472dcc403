/** A SandboxSpec for runtime-level tests (no worker): a bound sandbox of `install` for `session`, generation 1. */
import type { SandboxSpec } from '../../src/runtime/index.js';
import type { Workspaces } from '../../src/workspace/index.js';

export async function testSandboxSpec(
  o: { image: string; dir: string; runnerDir: string; workspaces: Workspaces },
  install: string,
  session: string,
  overrides: Partial<SandboxSpec> = {},
): Promise<SandboxSpec> {
  const name = `berth-${install}-${session}-g1`;
  return {
    name,
    image: o.image,
    installId: install,
    workerId: 'wrk_test',
    binding: { sessionId: session, generation: 1 },
    memoryMb: 300,
    cpus: 0.5,
    pidsLimit: 64,
    workspaceMb: 100,
    runDir: o.dir,
    workspaceDir: await o.workspaces.openSlot(name),
    runnerDir: o.runnerDir,
    extraMounts: [],
    isolation: 'runc',
    ...overrides,
  };
}
