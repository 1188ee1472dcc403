/**
 * Model agents end to end: real sandboxes whose runner drives the official Anthropic and
 * OpenAI SDKs through the gateway's model proxy to fake providers on loopback (the real
 * wire protocols, streaming). The agent writes a file with bash, reads it back and
 * replies; the key reaches the provider and is nowhere in the sandbox; the conversation
 * carries over to the next turn; a turn whose sandbox is docker-killed mid tool-call
 * resumes from its last model-call checkpoint, its killed call answered from the journal.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { SecretStore } from '../src/secrets/index.js';
import { type FakeModelServer, startFakeAnthropic, startFakeOpenAI } from './helpers/fake-models.js';
import { keySearch } from './helpers/key-search.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';

const KEY = `sk-e2e-${Math.random().toString(36).slice(2)}-secret`;
const reply = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

/** The tool results in the conversation the provider received with request `index`. */
function toolResults(fake: FakeModelServer, index: number): string[] {
  return (fake.requests[index]!.body.messages as { role: string; content: unknown }[]).flatMap((m) => {
    if (m.role === 'tool') return [String(m.content)];
    if (m.role === 'user' && Array.isArray(m.content))
      return (m.content as { type: string; content?: string }[])
        .filter((b) => b.type === 'tool_result')
        .map((b) => String(b.content));
    return [];
  });
}

for (const provider of ['anthropic', 'openai'] as const) {
  test(`${provider}: the model writes a file with bash, reads it back and replies; the key stays on the host`, async (t) => {
    const fake = await (provider === 'anthropic' ? startFakeAnthropic : startFakeOpenAI)([
      {
        tool: { name: 'bash', input: { command: 'echo "hello from the sandbox" > note.txt' } },
        text: 'Writing.',
      },
      { tool: { name: 'read_file', input: { path: 'note.txt' } } },
      { tool: { name: 'bash', input: { command: keySearch(KEY) } } },
      { text: 'The note says hello.' },
      { text: 'I remember the note.' },
    ]);
    t.after(() => fake.close());
    const env: Record<string, string> =
      provider === 'anthropic' ? { ANTHROPIC_BASE_URL: fake.url } : { OPENAI_BASE_URL: fake.url };
    const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
      ...env,
      BERTH_SECRET_KEY: 'e2e-passphrase',
    });
    await new SecretStore({ path: join(dataDir, 'secrets.json'), key: 'e2e-passphrase' }).set(provider, KEY);
    await client.request('POST', '/v1/agents', {
      name: 'm',
      provider,
      model: 'model-x',
      instructions: 'You are a careful test agent.',
    });

    const events = await sendAndCollect('m1', { agent: 'm', text: 'Write a note and read it back.' }, reply);
    const last = events.at(-1)!;
    assert.equal(last.type, 'reply', JSON.stringify(events));
    assert.equal(last.data.text, 'The note says hello.');
    const progress = events.filter((e) => e.type === 'progress').map((e) => e.data.text);
    assert.ok(
      progress.includes('tool bash started') && progress.includes('tool read_file finished'),
      String(progress),
    );
    assert.ok(progress.includes('Writing.'), 'model text is a progress event');

    // Upstream: the key, the system prompt, the tool results the sandbox produced.
    assert.equal(fake.requests.length, 4);
    for (const r of fake.requests) {
      if (provider === 'anthropic') assert.equal(r.headers['x-api-key'], KEY);
      else assert.equal(r.headers.authorization, `Bearer ${KEY}`);
    }
    const first = fake.requests[0]!.body;
    const system =
      provider === 'anthropic' ? first.system : (first.messages as { content: string }[])[0]!.content;
    assert.equal(system, 'You are a careful test agent.');
    const results = toolResults(fake, 3);
    assert.match(results[0]!, /exit code 0/);
    assert.equal(results[1], 'hello from the sandbox\n');
    assert.match(results[2]!, /KEY-ABSENT/, `the key was found in the sandbox: ${results[2]}`);

    // The committed workspace has the file; the turn's usage is in the store.
    await waitPromoted(host, 'm1');
    assert.equal(
      await readFile(join(dataDir, 'workspaces', 'm1', 'committed', 'note.txt'), 'utf8'),
      'hello from the sandbox\n',
    );
    const [turn] = await host.store.listTurns('m1');
    const usage = await host.store.sumModelUsage({ turnId: turn!.id });
    assert.equal(usage.calls, 4);
    assert.equal(
      usage.inputTokens + usage.outputTokens,
      fake.requests.reduce((n, r) => n + r.usage.input + r.usage.output, 0),
    );

    // The next turn continues the conversation.
    const second = await sendAndCollect('m1', { agent: 'm', text: 'What did the note say?' }, reply);
    assert.equal(second.at(-1)!.data.text, 'I remember the note.');
    const history = (fake.requests[4]!.body.messages as { role: string }[]).filter(
      (m) => m.role !== 'system',
    );
    assert.equal(history.length, 9, 'turn 1 (user, 4 model replies, 3 tool results) and the new message');
  });
}

test('anthropic: a turn docker-killed mid tool-call resumes from its last model-call checkpoint: each write once, no call paid twice', async (t) => {
  const STEPS = 8;
  const KILLED_AT = 5;
  // Step i appends its line; step KILLED_AT then waits on the first try, for the kill.
  const step = (i: number) =>
    `echo step-${i} >> steps.txt${i === KILLED_AT ? '; [ "$BERTH_ATTEMPT" = 1 ] && sleep 30; true' : ''}`;
  const fake = await startFakeAnthropic([
    { text: 'First answer.' },
    ...Array.from({ length: STEPS }, (_, i) => ({ tool: { name: 'bash', input: { command: step(i) } } })),
    { text: 'All steps done.' },
  ]);
  t.after(() => fake.close());
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, { ANTHROPIC_BASE_URL: fake.url });
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: '' }).set('anthropic', KEY);
  await client.request('POST', '/v1/agents', { name: 'm', provider: 'anthropic', model: 'model-x' });

  await sendAndCollect('k1', { agent: 'm', text: 'one' }, reply);
  let started = 0;
  let killed: Promise<void> | undefined;
  const events = await sendAndCollect(
    'k1',
    { agent: 'm', text: 'run the steps' },
    (e) => {
      if (e.type === 'progress' && e.data.text === 'tool bash started' && ++started === KILLED_AT + 1)
        killed = host.store.getSessionView('k1', Date.now()).then(async (v) => {
          await host.docker.getContainer(v!.sandbox!).kill();
        });
      return reply(e);
    },
    90_000,
  );
  await killed;
  assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events));
  assert.equal(events.at(-1)!.data.text, 'All steps done.');
  const turns = await host.store.listTurns('k1');
  assert.deepEqual(
    turns.map((x) => x.status),
    ['committed', 'aborted', 'committed'],
  );
  await waitPromoted(host, 'k1');
  const committed = join(dataDir, 'workspaces', 'k1', 'committed');
  assert.equal(
    await readFile(join(committed, 'steps.txt'), 'utf8'),
    Array.from({ length: STEPS }, (_, i) => `step-${i}\n`).join(''),
    'each step wrote its line once: the retry started from the checkpoint, not from the first prompt',
  );
  await assert.rejects(
    readFile(join(committed, '.berth', 'model-call.json')),
    'the loop file is not committed',
  );
  // One call for turn 1, then each of the STEPS + 1 calls of turn 2 once, but for at most
  // one paid again (an answer the kill beat to the journal).
  const calls = fake.scripted().length;
  assert.ok(calls <= STEPS + 3, `upstream calls: ${calls}`);
  // The whole conversation carries on: turn 1's exchange, then every step's call and result.
  const last = fake.requests.at(-1)!.body.messages as { role: string }[];
  assert.equal(last.length, 3 + 2 * STEPS);
  const usage = await host.store.sumModelUsage({ turnId: turns[2]!.id });
  assert.ok(usage.calls <= STEPS + 1 - KILLED_AT, `the retry paid ${usage.calls} calls`);
});

test('anthropic: a bash call that starts background processes returns when its shell exits, naming them', async (t) => {
  const fake = await startFakeAnthropic([
    { tool: { name: 'bash', input: { command: '(tail -f /dev/null &); sleep 1000 & echo started' } } },
    { tool: { name: 'bash', input: { command: 'pgrep -x tail && pgrep -x sleep' } } },
    { text: 'Servers up.' },
  ]);
  t.after(() => fake.close());
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, { ANTHROPIC_BASE_URL: fake.url });
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: '' }).set('anthropic', KEY);
  await client.request('POST', '/v1/agents', { name: 'm', provider: 'anthropic', model: 'model-x' });

  const events = await sendAndCollect('bg1', { agent: 'm', text: 'start them' }, reply);
  assert.equal(events.at(-1)!.data.text, 'Servers up.', JSON.stringify(events.at(-1)));
  const [started, seen] = toolResults(fake, 2);
  assert.match(
    started!,
    /^exit code 0\nstdout:\nstarted\n\nstderr:\n\nstill running \(they are killed when the turn ends\): \d+ (tail -f \/dev\/null|sleep 1000); \d+ (tail -f \/dev\/null|sleep 1000)$/,
  );
  assert.match(seen!, /^exit code 0\nstdout:\n\d+\n\d+\n/, 'both still run for the rest of the turn');
  const [turn] = await host.store.listTurns('bg1');
  assert.deepEqual([turn!.status, turn!.attempt], ['committed', 1]);
});

test('anthropic: the agent schedules a recurring message with its tool, within its cap; the schedule is the commit’s', async (t) => {
  const fake = await startFakeAnthropic([
    {
      tool: {
        name: 'schedule_message',
        input: { cron: '0 9 * * 1-5', tz: 'Europe/Paris', message: 'standup' },
      },
    },
    { tool: { name: 'schedule_message', input: { cron: '0 17 * * *', message: 'one too many' } } },
    { tool: { name: 'schedule_list', input: {} } },
    { text: 'Scheduled.' },
  ]);
  t.after(() => fake.close());
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
    ANTHROPIC_BASE_URL: fake.url,
    BERTH_SECRET_KEY: 'e2e-passphrase',
  });
  await new SecretStore({ path: join(dataDir, 'secrets.json'), key: 'e2e-passphrase' }).set('anthropic', KEY);
  await client.request('POST', '/v1/agents', {
    name: 'planner',
    provider: 'anthropic',
    model: 'model-x',
    maxSchedules: 1,
  });

  const events = await sendAndCollect(
    'p1',
    { agent: 'planner', text: 'Remind me every weekday at 9.' },
    reply,
  );
  assert.equal(events.at(-1)!.data.text, 'Scheduled.', JSON.stringify(events.at(-1)));
  const [made, refused, listed] = toolResults(fake, 3);
  assert.match(made!, /^scheduled; first run at \d{4}-/);
  assert.match(refused!, /SCHEDULE_LIMIT/, 'the cap answers the model as a tool error');
  assert.match(listed!, /"heldUntilCommit":\[\{"cron":"0 9 \* \* 1-5"/);
  const schedules = await host.store.listSchedules('p1');
  const [turn] = await host.store.listTurns('p1');
  assert.deepEqual(
    schedules.map((s) => [s.message, s.tz, s.status, s.createdByTurn]),
    [['standup', 'Europe/Paris', 'active', turn!.id]],
  );
});
