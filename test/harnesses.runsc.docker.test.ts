/**
 * A harness under gVisor: Claude Code (its published npm package in its agent image) in an
 * agent with `isolation: runsc`, applied through the SDK, against a local server speaking
 * the Anthropic Messages protocol. Its own shell tool runs under gVisor's kernel (dmesg),
 * its file is committed, and the next turn — in a fresh sandbox, as every runsc turn is —
 * continues the conversation from the harness's session files in the committed workspace.
 * Skipped, saying what it needs, without runsc or without the claude-code agent image.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { Berth } from '../src/client/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { startFakeAnthropic } from './helpers/fake-models.js';
import { harnessImageMissing } from './helpers/harness-image.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';
import { availableTiers } from './helpers/tiers.js';

const KEY = `sk-runsc-${Math.random().toString(36).slice(2)}`;
const done = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';
const skip =
  (await availableTiers()).find((x) => x.tier === 'runsc')!.skip ||
  (await harnessImageMissing('claude-code'));

test('claude-code under gVisor: its shell tool runs on the gVisor kernel, its file commits, turn 2 (a fresh sandbox) continues turn 1', {
  skip,
}, async (t) => {
  const command = 'dmesg | head -1; printf "hi %s\\n" gvisor > g.txt; cat g.txt';
  const fake = await startFakeAnthropic([
    { tool: { name: 'Bash', input: { command, description: 'run it' } }, text: 'Checking.' },
    { text: 'Done under gVisor.' },
    { text: 'I remember.' },
  ]);
  t.after(() => fake.close());
  const { host, dataDir, sendAndCollect } = await startTestHost(t, {
    ANTHROPIC_BASE_URL: fake.url,
    BERTH_RETRY_BASE: '200ms',
  });
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: '' }).set('anthropic', KEY);
  const sdk = new Berth({ url: host.url, token: host.adminToken });
  const applied = await sdk.agents.apply({
    name: 'cc',
    provider: 'claude-code',
    model: 'claude-sonnet-4-5',
    isolation: 'runsc',
    memoryMb: 1024,
  });
  assert.equal(applied.created, true);
  assert.match(String(applied.agent.image), /^berth-agent:/);

  const first = await sendAndCollect('h1', { agent: 'cc', text: 'Check the kernel.' }, done, 180_000);
  assert.equal(first.at(-1)!.type, 'reply', JSON.stringify(first.slice(-3)));
  assert.equal(first.at(-1)!.data.text, 'Done under gVisor.');
  const toolTurn = JSON.stringify(fake.scripted()[1]!.body);
  assert.match(toolTurn, /Starting gVisor/, 'the tool ran on the gVisor kernel');
  assert.match(toolTurn, /hi gvisor/);
  await waitPromoted(host, 'h1');
  assert.equal(
    await readFile(join(dataDir, 'workspaces', 'h1', 'committed', 'g.txt'), 'utf8'),
    'hi gvisor\n',
  );

  const second = await sendAndCollect('h1', { agent: 'cc', text: 'What did you find?' }, done, 180_000);
  assert.equal(second.at(-1)!.data.text, 'I remember.', JSON.stringify(second.slice(-2)));
  const resumed = JSON.stringify(fake.scripted()[2]!.body.messages);
  assert.match(resumed, /Check the kernel\./, 'turn 2 carries turn 1');
  assert.match(resumed, /Done under gVisor\./);
  const turns = await host.store.listTurns('h1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['committed', 'committed'],
  );
});
