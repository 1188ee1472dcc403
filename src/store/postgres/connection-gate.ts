/**
 * A FIFO of callers waiting for one of the pool's connections. pg's pool counts the wait
 * for a busy pool against `connectionTimeoutMillis`, so a burst (500 sessions posting and
 * opening their streams at once) turned queueing into STORE_UNAVAILABLE after the retry
 * budget: an error page for what is only latency. Behind this gate a caller holding a
 * permit always finds a connection free or openable, so the pool's timeout measures only
 * opening one (a database that does not answer), and the retry budget only outages.
 * Waiting here is bounded too, far longer: a store that serves nobody for that long is down.
 */
import { BerthError } from '../../core/index.js';

export class ConnectionGate {
  private free: number;
  private readonly waiting: (() => void)[] = [];

  constructor(
    permits: number,
    private readonly maxWaitMs: number,
  ) {
    this.free = permits;
  }

  /** Runs `work` with a permit, after every earlier caller got theirs. */
  async run<T>(work: () => Promise<T>): Promise<T> {
    await this.acquire();
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  private acquire(): Promise<void> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(grant), 1);
        reject(
          new BerthError(
            'STORE_UNAVAILABLE',
            `Waited ${this.maxWaitMs} ms for a PostgreSQL connection: every one was busy the whole time`,
          ),
        );
      }, this.maxWaitMs);
      this.waiting.push(grant);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}
