/** The one Store conformance suite, run unchanged against SQLite and a real PostgreSQL. */
import { openPostgresStore, openSqliteStore } from '../src/store/index.js';
import { freshDatabase } from './helpers/postgres.js';
import { runChannelConformance } from './store/channels.js';
import { LEASE_MS, RETRY, runStoreConformance } from './store/conformance.js';
import { runResidentHoldConformance } from './store/resident-holds.js';
import { runTakeBackConformance } from './store/take-back.js';

const sqlite = async () => openSqliteStore({ path: ':memory:', leaseMs: LEASE_MS, retry: RETRY });
const postgres = async () =>
  openPostgresStore({ url: await freshDatabase(), leaseMs: LEASE_MS, retry: RETRY });

runStoreConformance('sqlite', sqlite);
runResidentHoldConformance('sqlite', sqlite);
runTakeBackConformance('sqlite', sqlite);
runChannelConformance('sqlite', sqlite);
runStoreConformance('postgres', postgres);
runResidentHoldConformance('postgres', postgres);
runTakeBackConformance('postgres', postgres);
runChannelConformance('postgres', postgres);
