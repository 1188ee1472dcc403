/**
 * The cost of the gVisor tier (docs/isolation.md), each tier measured in the same run:
 *  - cold turn: message accepted → reply with a fresh sandbox (runc with
 *    BERTH_IDLE_TIMEOUT=0; runsc always starts a sandbox per turn);
 *  - syscall-heavy: `dd bs=1` of 200 000 bytes (400 000 read/write syscalls), timed inside
 *    the sandbox;
 *  - file-heavy: create, write and stat 300 files in /workspace (the gofer path), timed
 *    inside the sandbox.
 * runsc is skipped (and says so) when the engine does not have it.
 */
import { type BenchOptions, benchHost, stats, timedMessage } from './harness.js';

const SYSCALL_JOB =
  's=$(date +%s%N); dd if=/dev/zero of=/dev/null bs=1 count=200000 2>/dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 ))';
const FILE_JOB =
  's=$(date +%s%N); for i in $(seq 300); do echo $i > f$i; stat f$i >/dev/null; done; e=$(date +%s%N); rm -f f*; echo $(( (e - s) / 1000000 ))';

export async function isolation({ quick }: BenchOptions) {
  const runs = quick ? 3 : 10;
  const host = await benchHost({ BERTH_IDLE_TIMEOUT: '0', BERTH_WARM_POOL: '0' }, 1); // cold on both tiers: runsc has no pool
  const info = (await host.host.docker.info()) as { Runtimes?: Record<string, unknown> };
  const tiers = info.Runtimes?.runsc ? (['runc', 'runsc'] as const) : (['runc'] as const);
  const result: Record<string, unknown> = {
    bench: 'isolation',
    ...(tiers.length === 1 ? { runsc: 'skipped: runsc is not registered (scripts/ensure-runsc.sh)' } : {}),
  };
  try {
    for (const tier of tiers) {
      await host.client.request('POST', '/v1/agents', { name: tier, provider: 'command', isolation: tier });
      const cold: number[] = [];
      const syscalls: number[] = [];
      const files: number[] = [];
      for (let i = 0; i < runs; i++) {
        cold.push((await timedMessage(host.client, `cold-${tier}`, 'true', tier)).replyMs);
        await released(host, `cold-${tier}`);
        syscalls.push(Number((await timedMessage(host.client, `sys-${tier}`, SYSCALL_JOB, tier)).text));
        await released(host, `sys-${tier}`);
        files.push(Number((await timedMessage(host.client, `files-${tier}`, FILE_JOB, tier)).text));
        await released(host, `files-${tier}`);
      }
      result[tier] = { coldReplyMs: stats(cold), ddBs1Ms: stats(syscalls), files300Ms: stats(files) };
    }
  } finally {
    await host.close();
  }
  return result;
}

async function released(host: Awaited<ReturnType<typeof benchHost>>, sessionId: string): Promise<void> {
  while ((await host.host.store.getSessionView(sessionId, Date.now()))?.leaseOwner)
    await new Promise((r) => setTimeout(r, 10));
}
