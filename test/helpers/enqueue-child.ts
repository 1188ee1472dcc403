// A second process writing to the same SQLite file, for the shared-file test.
import { openSqliteStore } from '../../src/store/index.js';

const [path, count] = process.argv.slice(2) as [string, string];
const store = openSqliteStore({
  path,
  leaseMs: 10_000,
  retry: { retryBaseMs: 1000, retryMaxMs: 60_000, maxTries: 5 },
});
await new Promise((r) => setTimeout(r, 50)); // the relay binds its port in the background
for (let i = 0; i < Number(count); i++)
  await store.enqueueMessage({ sessionId: 'child', agent: 'sh', text: `c${i}`, now: Date.now() });
await new Promise((r) => setTimeout(r, 100)); // let the relayed datagrams leave before the socket closes
await store.close();
