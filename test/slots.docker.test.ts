/** Pull model: with every slot taken by an idle session, a queued session gets a slot at once. */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { startTestHost } from './helpers/test-host.js';

test('an idle sandbox gives its slot to a queued session instead of holding it until idle timeout', async (t) => {
  const { host, client, sendAndCollect } = await startTestHost(t, {
    BERTH_SLOTS: '1',
    BERTH_IDLE_TIMEOUT: '10m',
  });
  await client.request('POST', '/v1/agents', { name: 'sh', provider: 'command' });
  await sendAndCollect('first', { agent: 'sh', text: 'echo one' }, (e) => e.type === 'reply');
  assert.equal(
    (await host.store.getSessionView('first', Date.now()))?.status,
    'bound',
    'first keeps its sandbox while idle',
  );
  // Without yielding, this would wait the 10-minute idle timeout and the 20 s collector would give up.
  const events = await sendAndCollect(
    'second',
    { agent: 'sh', text: 'echo two' },
    (e) => e.type === 'reply',
    20_000,
  );
  assert.equal(events.at(-1)?.data.text, 'two\n');
  const first = await host.store.getSessionView('first', Date.now());
  assert.equal(first?.status, 'idle');
  assert.equal(first?.sandbox, null);
});
