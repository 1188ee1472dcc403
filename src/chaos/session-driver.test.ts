import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { ApiClient } from '../client/index.js';
import { driveSession, type RequestRecord } from './session-driver.js';
import { expectedReply } from './workload.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** Drives session s1 for `turns` turns through `client`, with a 300 ms per-message timeout. */
async function drive(client: ApiClient, turns: number) {
  const records: RequestRecord[] = [];
  const unsent = await driveSession(
    {
      client,
      agent: 'a',
      turns,
      seed: 1,
      messageTimeoutMs: 300,
      abort: new AbortController().signal,
      onRecord: (r) => records.push(r),
    },
    0,
    's1',
  );
  return { unsent, records };
}

test('a message berth says nothing more about ends unknown at the per-message timeout, whatever the collector does', {
  timeout: 30_000,
}, async () => {
  // The POST is answered, and the event stream stays open with nothing in it.
  const client = {
    request: async () => ({ message: { id: 1 }, eventId: 0 }),
    events: async function* (_session: string, _after: number, signal: AbortSignal) {
      await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      yield* [];
    },
  } as unknown as ApiClient;
  const collecting = setInterval(gc, 20);
  let records: RequestRecord[];
  try {
    const driven = await drive(client, 2);
    records = driven.records;
    assert.equal(driven.unsent, 1, 'the next turn is not sent after an unknown');
  } finally {
    clearInterval(collecting);
  }
  assert.deepEqual(
    records.map((r) => [r.outcome, r.reason]),
    [['unknown', 'events: nothing from berth about the message within the per-message timeout']],
  );
});

test('a message queued longer than the per-message timeout, with berth saying where it is, ends ok', async () => {
  const client = {
    request: async () => ({ message: { id: 7 }, eventId: 0 }),
    events: async function* () {
      // Twice the timeout in queue positions, then the reply.
      for (let i = 0; i < 6; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        yield { type: 'queued', data: { position: 6 - i } };
      }
      yield { type: 'reply', data: { inReplyTo: [7], text: expectedReply('s1', 1) } };
    },
  } as unknown as ApiClient;
  const { records } = await drive(client, 1);
  assert.deepEqual(
    records.map((r) => [r.outcome, r.reason]),
    [['ok', '']],
  );
});
