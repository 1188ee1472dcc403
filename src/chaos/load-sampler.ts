/**
 * What a chaos run costs the machine and the store, sampled every second while the
 * workload runs: peak memory in use on the host (MemTotal - MemAvailable, so other
 * tenants of the machine count too: compare with `memoryBaselineMb`), peak resident memory
 * of berth's own processes (the API and workers), and for a PostgreSQL store its peak
 * connections and the transactions committed meanwhile (pg_stat_database). A sample the
 * store cannot answer (it is being restarted) is skipped.
 */
import { readFile } from 'node:fs/promises';
import pg from 'pg';

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
  private commitsAtStart: number | null = null;
  private sampling: Promise<void> = Promise.resolve();

  constructor(
    /** PIDs of the berth processes right now (workers restart with new pids). */
    private readonly berthPids: () => number[],
    private readonly storeUrl: string | null,
  ) {}

  async start(): Promise<void> {
    this.memoryBaselineMb = await hostMemoryUsedMb();
    this.commitsAtStart = this.storeUrl ? await this.storeStats().then((s) => s.commits) : null;
    this.timer = setInterval(() => {
      this.sampling = this.sample().catch(() => undefined);
    }, SAMPLE_MS);
  }

  async stop(): Promise<LoadReport> {
    clearInterval(this.timer);
    await this.sampling;
    let store: LoadReport['store'] = null;
    if (this.storeUrl && this.commitsAtStart !== null) {
      const { commits } = await this.storeStats();
      const seconds = (Date.now() - this.startedAt) / 1000;
      const delta = commits - this.commitsAtStart;
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
    if (this.storeUrl) {
      const { connections } = await this.storeStats();
      this.peakConnections = Math.max(this.peakConnections, connections);
    }
  }

  /** Connections of berth processes (ours excluded) and transactions committed in the run's database. */
  private async storeStats(): Promise<{ connections: number; commits: number }> {
    const client = new pg.Client({ connectionString: this.storeUrl!, connectionTimeoutMillis: 2000 });
    client.on('error', () => undefined); // a restart cuts it: this sample is skipped
    await client.connect();
    try {
      const { rows } = await client.query<{ connections: string; commits: string }>(
        `SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'berth') AS connections,
                (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
      );
      return { connections: Number(rows[0]!.connections), commits: Number(rows[0]!.commits) };
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
