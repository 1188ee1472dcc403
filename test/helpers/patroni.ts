/** One throw-away Patroni cluster per test file (two members, synchronous), a fresh database for each store a test opens. */
import { after } from 'node:test';
import { type PatroniCluster, startPatroniCluster } from '../../src/chaos/index.js';

let cluster: Promise<PatroniCluster> | undefined;
let databases = 0;

// A file-level hook: runs after all the tests of the file that imports this module.
after(async () => {
  if (cluster) await (await cluster).remove();
});

/** Starts the file's cluster on first use; it is removed after the file's tests. */
export function testPatroni(): Promise<PatroniCluster> {
  cluster ??= startPatroniCluster();
  return cluster;
}

/** Multi-host URL of a new, empty database on the file's cluster. */
export async function freshPatroniDatabase(): Promise<string> {
  databases += 1;
  return (await testPatroni()).createDatabase(`berth_ha_${process.pid}_${databases}`);
}
