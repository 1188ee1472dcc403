/**
 * What a chaos run costs the machine and the store, sampled every second while the
 * workload runs: peak memory in use on the host (MemTotal - MemAvailable, so other
 * tenants of the machine count too: compare with `memoryBaselineMb`), peak resident memory
 * of berth's own processes (the API and workers), and for a PostgreSQL store its peak
 * connections and the transactions committed meanwhile (pg_stat_database, on whichever
 * server is the primary at each sample: a failover adds the new primary's count from its
 * first sample on). A sample the store cannot answer (it is restarting, failing over) is
 * skipped.
 */
import { readFile } from 'node:fs/promises';
import { connectToPrimary } from '../store/index.js';

export interface LoadReport {
  /** Host memory in use before the workload started, MiB. */
  memoryBaselineMb: number;
  peakMemoryMb: number;
  /** Sum of the RSS of the berth processes at the sample where it was highest, MiB. */
  peakBerthRssMb: number;
  /** null for SQLite. */
  store: { peakConnections: number; commits: number; commitsPerSec: number } | null;
}

const SAMPLE_MS = 1000;

export class LoadSampler {
  private readonly startedAt = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private memoryBaselineMb = 0;
  private peakMemoryMb = 0;
  private peakBerthRssMb = 0;
  private peakConnections = 0;
  /** Transactions committed per server (its address): the first and the latest count seen. */
  private readonly commitsByServer = new Map<string, { first: number; last: number }>();
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    /** PIDs of the berth processes right now (workers restart with new pids). */
    private readonly berthPids: () => number[],
    private readonly storeUrl: string | null,
  ) {}

  async start(): Promise<void> {
    this.memoryBaselineMb = await hostMemoryUsedMb();
    if (this.storeUrl) await this.sampleStore();
    this.timer = setInterval(() => {
      this.sampling = this.sample().catch(() => undefined);
    }, SAMPLE_MS);
  }

  async stop(): Promise<LoadReport> {
    clearInterval(this.timer);
    await this.sampling;
    let store: LoadReport['store'] = null;
    if (this.storeUrl) {
      await this.sampleStore().catch(() => undefined);
      const seconds = (Date.now() - this.startedAt) / 1000;
      let delta = 0;
      for (const { first, last } of this.commitsByServer.values()) delta += last - first;
      store = {
        peakConnections: this.peakConnections,
        commits: delta,
        commitsPerSec: Math.round(delta / seconds),
      };
    }
    return {
      memoryBaselineMb: this.memoryBaselineMb,
      peakMemoryMb: this.peakMemoryMb,
      peakBerthRssMb: this.peakBerthRssMb,
      store,
    };
  }

  private async sample(): Promise<void> {
    this.peakMemoryMb = Math.max(this.peakMemoryMb, await hostMemoryUsedMb());
    let rssKb = 0;
    for (const pid of this.berthPids()) rssKb += await rssOfKb(pid);
    this.peakBerthRssMb = Math.max(this.peakBerthRssMb, Math.round(rssKb / 1024));
    if (this.storeUrl) await this.sampleStore();
  }

  /** Connections of berth processes (ours excluded) and transactions committed in the run's database, on the primary. */
  private async sampleStore(): Promise<void> {
    const client = await connectToPrimary(this.storeUrl!);
    client.on('error', () => undefined); // a restart cuts it: this sample is skipped
    try {
      const { rows } = await client.query<{ server: string; connections: string; commits: string }>(
        `SELECT coalesce(host(inet_server_addr()), 'local') || ':' || current_setting('port') AS server,
                (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'berth') AS connections,
                (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
      );
      const { server, connections, commits } = rows[0]!;
      this.peakConnections = Math.max(this.peakConnections, Number(connections));
      const seen = this.commitsByServer.get(server);
      if (seen) seen.last = Number(commits);
      else this.commitsByServer.set(server, { first: Number(commits), last: Number(commits) });
    } finally {
      await client.end();
    }
  }
}

async function hostMemoryUsedMb(): Promise<number> {
  const text = await readFile('/proc/meminfo', 'utf8');
  const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? 0);
  return Math.round((kb('MemTotal') - kb('MemAvailable')) / 1024);
}

async function rssOfKb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
}
