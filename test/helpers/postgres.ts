/** One throw-away PostgreSQL cluster per test file, a fresh database for each store a test opens. */
import { after } from 'node:test';
import { type PostgresCluster, startPostgresCluster } from '../../src/chaos/index.js';

let cluster: Promise<PostgresCluster> | undefined;
let databases = 0;

// Registered when a test file imports this module: a file-level hook, run after all its tests.
after(async () => {
  if (cluster) await (await cluster).remove();
});

/** Starts the file's cluster on first use; it is removed after the file's tests. */
export function testCluster(): Promise<PostgresCluster> {
  cluster ??= startPostgresCluster();
  return cluster;
}

/** Connection string of a new, empty database. */
export async function freshDatabase(): Promise<string> {
  databases += 1;
  return (await testCluster()).createDatabase(`berth_test_${process.pid}_${databases}`);
}
