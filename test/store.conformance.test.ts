/** The one Store conformance suite, run unchanged against SQLite and a real PostgreSQL. */
import { openPostgresStore, openSqliteStore } from '../src/store/index.js';
import { freshDatabase } from './helpers/postgres.js';
import { runChannelConformance } from './store/channels.js';
import { runCheckpointConformance } from './store/checkpoints.js';
import { LEASE_MS, RETRY, runStoreConformance } from './store/conformance.js';
import { runFairShareConformance } from './store/fair-share.js';
import { runKeptCountsConformance } from './store/kept-counts.js';
import { runListingConformance } from './store/listings.js';
import { runResidentHoldConformance } from './store/resident-holds.js';
import { runRewindConformance } from './store/rewind.js';
import { runTakeBackConformance } from './store/take-back.js';

const sqlite = async () => openSqliteStore({ path: ':memory:', leaseMs: LEASE_MS, retry: RETRY });
const postgres = async () =>
  openPostgresStore({ url: await freshDatabase(), leaseMs: LEASE_MS, retry: RETRY });

runStoreConformance('sqlite', sqlite);
runResidentHoldConformance('sqlite', sqlite);
runTakeBackConformance('sqlite', sqlite);
runRewindConformance('sqlite', sqlite);
runCheckpointConformance('sqlite', sqlite);
runKeptCountsConformance('sqlite', sqlite);
runListingConformance('sqlite', sqlite);
runStoreConformance('postgres', postgres);
runResidentHoldConformance('postgres', postgres);
runTakeBackConformance('postgres', postgres);
runRewindConformance('postgres', postgres);
runCheckpointConformance('postgres', postgres);
runKeptCountsConformance('postgres', postgres);
runListingConformance('postgres', postgres);
runChannelConformance('sqlite', sqlite);
runFairShareConformance('sqlite', sqlite);
runFairShareConformance('postgres', postgres);
runStoreConformance('postgres', postgres);
runResidentHoldConformance('postgres', postgres);
runTakeBackConformance('postgres', postgres);
runChannelConformance('postgres', postgres);
