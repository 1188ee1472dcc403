/**
 * The harnesses people run — the published npm packages of Claude Code, Codex and
 * opencode in their agent images (berth image build --with …) — inside real sandboxes,
 * against local servers speaking the providers' wire protocols (Anthropic Messages with
 * SSE; OpenAI Responses, streamed), scripted so that the harness calls its own tools.
 * For each harness: it writes a file and runs a command, and the file is committed; the
 * upstream sees the host's key and the sandbox holds it nowhere, nor, after the turn, its
 * committed workspace, its layers or the blob store's objects on the host; the next turn continues
 * the conversation; a `docker kill` mid-turn leaves no trace of the killed try's tool, and
 * the retry continues the harness's transcript as of its last model call, with the
 * continuation prompt. A harness past its timeout, exiting non-zero
 * or killed by a signal fails the turn with its catalogue code and what it said, and the
 * retry policy applies. An agent whose image lacks its harness is refused at create.
 * Skipped, saying why, when the agent image is not built.
 */
import assert from 'node:assert/strict';
import { access, chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { type TestContext, test } from 'node:test';
import type { HarnessName } from '../src/core/index.js';
import { CONTINUATION } from '../src/runner/harness-provider.js';
import { SecretStore } from '../src/secrets/index.js';
import { type FakeModelServer, startFakeAnthropic, startFakeOpenAI } from './helpers/fake-models.js';
import { harnessImageMissing } from './helpers/harness-image.js';
import { hostFilesHolding, keySearch } from './helpers/key-search.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';
import { secretSearchJob } from './security/probes.js';

const KEY = `sk-harness-${Math.random().toString(36).slice(2)}-secret`;
/** A command that runs for five minutes without using the CPU. */
const WAIT = `perl -e 'select(undef, undef, undef, 300)'`;
/** A thread id codex never saw. */
const LOST_THREAD = '0199a213-81c0-7800-8aa1-bbab2a035a53';
const done = (e: { type: string }) => e.type === 'reply' || e.type === 'failed';

interface HarnessCase {
  api: 'anthropic' | 'openai';
  model: string;
  /** The harness's own shell tool, as its model would call it. */
  shell(command: string): { name: string; input: Record<string, unknown> };
  /** A side call the harness makes on its own (a session title), answered apart from the script. */
  side?: (body: Record<string, unknown>) => string | undefined;
}

const CASES: Record<HarnessName, HarnessCase> = {
  'claude-code': {
    api: 'anthropic',
    model: 'claude-sonnet-4-5',
    shell: (command) => ({ name: 'Bash', input: { command, description: 'run it' } }),
  },
  codex: {
    api: 'openai',
    model: 'gpt-5-codex',
    shell: (command) => ({ name: 'exec_command', input: { cmd: command } }),
  },
  opencode: {
    api: 'anthropic',
    model: 'claude-sonnet-4-5',
    shell: (command) => ({ name: 'bash', input: { command, description: 'run it' } }),
    side: (body) => (JSON.stringify(body.system ?? '').includes('title generator') ? 'A title' : undefined),
  },
};

async function setUp(
  t: TestContext,
  harness: HarnessName,
  script: ConstructorParameters<typeof Array>[],
  env: Record<string, string> = {},
  agentFields: Record<string, unknown> = {},
) {
  const c = CASES[harness];
  const fake: FakeModelServer = await (c.api === 'anthropic' ? startFakeAnthropic : startFakeOpenAI)(
    script as never,
  );
  if (c.side) fake.side = c.side;
  t.after(() => fake.close());
  const baseUrl: Record<string, string> =
    c.api === 'anthropic' ? { ANTHROPIC_BASE_URL: fake.url } : { OPENAI_BASE_URL: fake.url };
  const th = await startTestHost(t, { ...baseUrl, BERTH_RETRY_BASE: '200ms', ...env });
  await new SecretStore({ path: join(th.dataDir, 'secrets.json'), key: '' }).set(c.api, KEY);
  const agent = await th.client.request<{ image: string }>('POST', '/v1/agents', {
    name: 'h',
    provider: harness,
    model: c.model,
    instructions: 'You are a careful test agent.',
    memoryMb: 1024,
    ...agentFields,
  });
  return { ...th, fake, agent };
}

const committed = (dataDir: string, session: string, path: string) =>
  readFile(join(dataDir, 'workspaces', session, 'committed', path), 'utf8');

/**
 * The user's and the model's words a request carried, in order: [role, text] of each text
 * block (Messages API) or message item (Responses API), without the harness's own
 * <system-reminder>/<environment_context> insertions and ids.
 */
function dialogue(r: { body: Record<string, unknown> }): [string, string][] {
  type Block = { type?: string; text?: string };
  const items = (r.body.messages ?? r.body.input) as { role?: string; type?: string; content?: unknown }[];
  return items.flatMap((m) => {
    if (m.role !== 'user' && m.role !== 'assistant') return [];
    const blocks: Block[] =
      typeof m.content === 'string' ? [{ text: m.content }] : ((m.content as Block[]) ?? []);
    const texts = blocks.map((b) => b.text ?? '').filter((t) => t.trim() && !t.trimStart().startsWith('<'));
    return texts.length ? [[m.role, texts.join('\n')] as [string, string]] : [];
  });
}

/** What the harness's tools returned, in order, as the model received it. */
function toolOutputs(r: { body: Record<string, unknown> }): string[] {
  type Item = { type?: string; content?: unknown; output?: unknown; text?: string };
  const items = (r.body.messages ?? r.body.input) as Item[];
  const text = (v: unknown): string =>
    typeof v === 'string'
      ? v
      : Array.isArray(v)
        ? v.map((b: Item) => text(b.text ?? b.content ?? '')).join('')
        : '';
  return items.flatMap((m) => {
    if (m.type === 'function_call_output') return [text(m.output)];
    if (!Array.isArray(m.content)) return [];
    return (m.content as Item[]).filter((b) => b.type === 'tool_result').map((b) => text(b.content));
  });
}

/** The whole conversation a request carried, as text (messages or Responses input). */
const conversation = (r: { body: Record<string, unknown> }) =>
  JSON.stringify(r.body.messages ?? r.body.input);

for (const harness of Object.keys(CASES) as HarnessName[]) {
  const c = CASES[harness];
  const skip = await harnessImageMissing(harness);

  test(`${harness}: writes a file and runs a command with its own tool; the file is committed; the key stays on the host; turn 2 continues turn 1`, {
    skip,
  }, async (t) => {
    const { host, dataDir, fake, agent, sendAndCollect } = await setUp(t, harness, [
      {
        tool: c.shell('printf "hello %s\\n" sandbox > note.txt && cat note.txt && echo "uid=$(id -u)"'),
        text: 'Writing.',
      },
      { tool: c.shell(keySearch(KEY)) },
      { tool: c.shell(secretSearchJob(KEY)) },
      { text: 'The note says hello.' },
      { text: 'I remember the note.' },
    ] as never);
    assert.match(agent.image, /^berth-agent:/, 'the agent runs the agent image of its harness');

    const events = await sendAndCollect('s1', { agent: 'h', text: 'Write a note.' }, done, 120_000);
    const last = events.at(-1)!;
    assert.equal(last.type, 'reply', JSON.stringify(events.slice(-3)));
    assert.equal(last.data.text, 'The note says hello.');
    const progress = events.filter((e) => e.type === 'progress').map((e) => String(e.data.text));
    assert.ok(
      progress.some((p) => /^tool \S+ (started|finished)/.test(p)),
      `the harness's tool calls are progress events: ${progress}`,
    );

    const scripted = fake.scripted();
    assert.equal(scripted.length, 4, 'four model calls the script answered');
    for (const r of fake.requests) {
      if (c.api === 'anthropic') assert.equal(r.headers['x-api-key'], KEY);
      else assert.equal(r.headers.authorization, `Bearer ${KEY}`);
      assert.equal(r.body.model, c.model);
    }
    // What the tools printed reached the model: the file's text, uid 1000, no key anywhere.
    assert.match(toolOutputs(scripted[1]!).at(-1)!, /hello sandbox\s+uid=1000/);
    assert.match(toolOutputs(scripted[2]!).at(-1)!, /KEY-ABSENT/, 'the key is in a process or file');
    // The attack suite's search (security/probes.ts): no file under / and no process environment holds it.
    assert.match(toolOutputs(scripted[3]!).at(-1)!, /^files:none\n0$/m, 'the secret search found the key');
    assert.match(
      JSON.stringify(scripted[0]!.body),
      /You are a careful test agent\./,
      'instructions reach it',
    );

    await waitPromoted(host, 's1');
    assert.equal(await committed(dataDir, 's1', 'note.txt'), 'hello sandbox\n');
    await access(join(dataDir, 'workspaces', 's1', 'committed', '.berth', harness));
    // After the turn, on the host: what it committed, its layers (discarded once promoted: the
    // dir is there, empty) and the blob store's objects (the layer as uploaded) hold no key either.
    const [kept, layers] = ['committed', 'layers'].map((d) => join(dataDir, 'workspaces', 's1', d));
    const blobs = join(dataDir, 'blobs');
    const search = await hostFilesHolding(KEY, [kept!, layers!, blobs]);
    assert.deepEqual(search.holding, [], 'files on the host holding the key');
    assert.ok(search.searched[kept!]! > 0 && search.searched[blobs]! > 0, JSON.stringify(search.searched));
    const [turn] = await host.store.listTurns('s1');
    const usage = await host.store.sumModelUsage({ turnId: turn!.id });
    assert.equal(usage.calls, fake.requests.length, 'every call is metered');
    assert.equal(
      usage.inputTokens + usage.outputTokens,
      fake.requests.reduce((n, r) => n + r.usage.input + r.usage.output, 0),
    );

    const second = await sendAndCollect('s1', { agent: 'h', text: 'What did the note say?' }, done, 120_000);
    assert.equal(second.at(-1)!.data.text, 'I remember the note.', JSON.stringify(second.slice(-2)));
    const resumed = conversation(fake.scripted()[4]!);
    assert.match(resumed, /Write a note\./, 'turn 2 carries turn 1');
    assert.match(resumed, /The note says hello\./);
    assert.match(resumed, /What did the note say\?/);
  });

  test(`${harness}: docker kill mid-turn leaves no trace; the retry resumes the transcript of its last model call`, {
    skip,
  }, async (t) => {
    const slow =
      'echo "try $BERTH_ATTEMPT" > "try-$BERTH_ATTEMPT.txt"; if [ "$BERTH_ATTEMPT" = 1 ]; then sleep 120; fi; echo survived';
    const { host, dataDir, fake, sendAndCollect } = await setUp(t, harness, [
      { text: 'First answer.' },
      { tool: c.shell(slow) },
      { tool: c.shell(slow) },
      { text: 'Done after the retry.' },
    ] as never);
    await sendAndCollect('k1', { agent: 'h', text: 'one' }, done, 120_000);
    // Once the model asked for the tool, the tool runs (sleeps): kill the sandbox the way it happens.
    const killWhenToolRuns = async () => {
      while (fake.scripted().length < 2) await new Promise((r) => setTimeout(r, 100));
      await new Promise((r) => setTimeout(r, 1500));
      const view = await host.store.getSessionView('k1', Date.now());
      await host.docker.getContainer(view!.sandbox!).kill();
    };

    let killed: Promise<void> | undefined;
    const events = await sendAndCollect(
      'k1',
      { agent: 'h', text: 'two' },
      (e) => {
        if (!killed && e.type === 'started') killed = killWhenToolRuns();
        return done(e);
      },
      180_000,
    );
    await killed;
    assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events.slice(-3)));
    assert.equal(events.at(-1)!.data.text, 'Done after the retry.');
    const turns = await host.store.listTurns('k1');
    assert.deepEqual(
      turns.map((x) => x.status),
      ['committed', 'aborted', 'committed'],
    );
    await waitPromoted(host, 'k1');
    assert.equal(await committed(dataDir, 'k1', 'try-2.txt'), 'try 2\n');
    await assert.rejects(committed(dataDir, 'k1', 'try-1.txt'), 'the killed try left no file');
    const [, try1, try2] = fake.scripted();
    // Resumed from the checkpoint of try 1's call: its transcript to that call, then the
    // continuation. Each harness keeps the roles alternating its own way: Claude Code puts
    // an assistant filler of its own before the continuation, opencode joins the
    // continuation to the user message before it.
    const [role, last] = dialogue(try2!).at(-1)!;
    assert.equal(role, 'user');
    assert.ok(last.endsWith(CONTINUATION), `the resumed call ends with the continuation: ${last}`);
    const before = last.slice(0, -CONTINUATION.length).trimEnd();
    const resumed = [...dialogue(try2!).slice(0, -1), ...(before ? [['user', before]] : [])];
    assert.deepEqual(resumed.slice(0, dialogue(try1!).length), dialogue(try1!));
    assert.deepEqual(
      dialogue(try1!).slice(-3),
      [
        ['user', 'one'],
        ['assistant', 'First answer.'],
        ['user', 'two'],
      ],
      'try 1 carried turn 1 (one exchange), then "two"',
    );
    assert.doesNotMatch(conversation(try2!), /try 1/);
  });
}

for (const harness of Object.keys(CASES) as HarnessName[]) {
  const c = CASES[harness];
  test(`${harness}: the agent's instruction file and skills, mounted read-only from its configDir, reach the harness`, {
    skip: await harnessImageMissing(harness),
  }, async (t) => {
    const configDir = await mkdtemp(join(tmpdir(), 'berth-agent-config-'));
    t.after(() => rm(configDir, { recursive: true, force: true }));
    const file = harness === 'claude-code' ? 'CLAUDE.md' : 'AGENTS.md';
    await writeFile(join(configDir, file), 'Answer in one line. MARKER-INSTRUCTIONS-FILE\n');
    await mkdir(join(configDir, 'skills', 'greeter'), { recursive: true });
    await writeFile(
      join(configDir, 'skills', 'greeter', 'SKILL.md'),
      '---\nname: greeter\ndescription: Greets people. MARKER-SKILL\n---\nSay hello.\n',
    );
    await chmod(configDir, 0o755);
    await chmod(join(configDir, 'skills'), 0o755);
    await chmod(join(configDir, 'skills', 'greeter'), 0o755);
    const allowlist = join(configDir, '..', `${basename(configDir)}.allowlist.json`);
    await writeFile(allowlist, JSON.stringify({ allowedRoots: [{ path: configDir }] }));
    t.after(() => rm(allowlist, { force: true }));
    const { fake, sendAndCollect } = await setUp(
      t,
      harness,
      [
        { tool: c.shell(`cat /data/agent-config/${file}; touch /data/agent-config/x || echo READ-ONLY`) },
        { text: 'ok' },
      ] as never,
      { BERTH_MOUNT_ALLOWLIST: allowlist },
      { configDir },
    );
    const events = await sendAndCollect('c1', { agent: 'h', text: 'hi' }, done, 120_000);
    assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events.slice(-3)));
    const first = JSON.stringify(fake.scripted()[0]!.body);
    assert.match(
      first,
      /You are a careful test agent\.(.|\n)*MARKER-INSTRUCTIONS-FILE/,
      'instructions, then the file',
    );
    assert.match(first, /MARKER-SKILL/, 'the skill is offered to the model');
    assert.match(
      toolOutputs(fake.scripted()[1]!).at(-1)!,
      /READ-ONLY/,
      'configDir is read-only in the sandbox',
    );
  });
}

for (const harness of Object.keys(CASES) as HarnessName[]) {
  test(`${harness}: a message longer than one command-line argument may be (128 KiB) reaches the model whole`, {
    skip: await harnessImageMissing(harness),
  }, async (t) => {
    const { fake, sendAndCollect } = await setUp(t, harness, [{ text: 'read it all' }] as never);
    const text = `begin ${'lorem ipsum '.repeat(17_000)} END-OF-LONG-MESSAGE`;
    assert.ok(Buffer.byteLength(text) > 200_000);
    const events = await sendAndCollect('long', { agent: 'h', text }, done, 120_000);
    assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events.slice(-3)));
    assert.match(conversation(fake.scripted()[0]!), /END-OF-LONG-MESSAGE/);
  });
}

test('claude-code past its harnessTimeoutMs: HARNESS_TIMEOUT with its process group killed, retried, then failed', {
  skip: await harnessImageMissing('claude-code'),
}, async (t) => {
  const c = CASES['claude-code'];
  const { host, fake, sendAndCollect } = await setUp(
    t,
    'claude-code',
    // Claude Code refuses a bare long `sleep`; a program that waits is what a real tool does.
    [{ tool: c.shell(WAIT) }, { tool: c.shell(WAIT) }] as never,
    { BERTH_MAX_TRIES: '2' },
    // Long enough for the first model call to be made on a loaded machine (the binary's start, the checkpoint before it).
    { harnessTimeoutMs: 10_000 },
  );
  const events = await sendAndCollect('t1', { agent: 'h', text: 'sleep' }, done, 120_000);
  assert.equal(events.at(-1)!.type, 'failed', JSON.stringify(events.slice(-3)));
  const turns = await host.store.listTurns('t1');
  assert.equal(turns.length, 2, `the retry policy applied: ${JSON.stringify(turns.map((x) => x.error))}`);
  for (const turn of turns) {
    assert.equal(turn.errorCode, 'HARNESS_TIMEOUT');
    assert.match(turn.error!, /\(10000 ms\)/, 'the error names the timeout');
  }
  assert.ok(fake.scripted().length >= 1, 'the first try was running its tool when it was killed');
});

test('codex exiting non-zero (its provider refused the call): HARNESS_FAILED with the error its failure event gave, retried', {
  skip: await harnessImageMissing('codex'),
}, async (t) => {
  const { host, sendAndCollect } = await setUp(t, 'codex', [{ status: 400 }, { status: 400 }] as never, {
    BERTH_MAX_TRIES: '2',
  });
  const events = await sendAndCollect('f1', { agent: 'h', text: 'hi' }, done, 120_000);
  assert.equal(events.at(-1)!.type, 'failed', JSON.stringify(events.slice(-3)));
  const turns = await host.store.listTurns('f1');
  assert.equal(turns.length, 2, 'the retry policy applied');
  for (const turn of turns) {
    assert.equal(turn.errorCode, 'HARNESS_FAILED', String(turn.error));
    // `codex exec --json` reports this on stdout (turn.failed) and writes nothing on stderr.
    assert.match(turn.error!, /^codex: \{"error":\{"message":"scripted 400".*\(codex exited with code 1\)$/s);
  }
});

test('codex exiting non-zero with an error on stderr (its saved thread id names no transcript): HARNESS_FAILED with its last stderr lines, retried', {
  skip: await harnessImageMissing('codex'),
}, async (t) => {
  const c = CASES.codex;
  const { host, fake, sendAndCollect } = await setUp(
    t,
    'codex',
    [
      { tool: c.shell(`echo ${LOST_THREAD} > /workspace/.berth/codex/berth-thread-id`) },
      { text: 'Forgot it all.' },
    ] as never,
    { BERTH_MAX_TRIES: '2' },
  );
  const first = await sendAndCollect('f2', { agent: 'h', text: 'forget' }, done, 120_000);
  assert.equal(first.at(-1)!.data.text, 'Forgot it all.', JSON.stringify(first.slice(-3)));
  // The next turn resumes the committed thread id, which the first turn's tool overwrote.
  const events = await sendAndCollect('f2', { agent: 'h', text: 'remember?' }, done, 120_000);
  assert.equal(events.at(-1)!.type, 'failed', JSON.stringify(events.slice(-3)));
  const turns = (await host.store.listTurns('f2')).slice(1);
  assert.equal(turns.length, 2, 'the retry policy applied');
  for (const turn of turns) {
    assert.equal(turn.errorCode, 'HARNESS_FAILED', String(turn.error));
    assert.match(
      turn.error!,
      new RegExp(
        `codex exited with code 1; last stderr lines:\nError: thread/resume: .*no rollout found for thread id ${LOST_THREAD}`,
      ),
    );
  }
  assert.equal(fake.scripted().length, 2, 'codex failed before any model call');
});

test('claude-code killed by a signal mid-turn (its own shell tool kills it): HARNESS_FAILED naming the signal, retried, and the retry commits', {
  skip: await harnessImageMissing('claude-code'),
}, async (t) => {
  const c = CASES['claude-code'];
  // The harness is the ancestor of the tool's shell whose parent is the runner; the first try kills it.
  const crash =
    'p=$$; while [ "$p" -gt 1 ] && [ "$(ps -o ppid= -p "$p" | tr -d " ")" != "$BERTH_RUNNER_PID" ]; do p=$(ps -o ppid= -p "$p" | tr -d " "); done; ' +
    'echo "try $BERTH_ATTEMPT: harness $p is $(cat /proc/$p/comm)" > "crash-$BERTH_ATTEMPT.txt"; ' +
    'if [ "$BERTH_ATTEMPT" = 1 ]; then kill -SEGV "$p"; sleep 30; fi; echo survived';
  const { host, dataDir, fake, sendAndCollect } = await setUp(t, 'claude-code', [
    { tool: c.shell(crash) },
    { tool: c.shell(crash) },
    { text: 'Recovered.' },
  ] as never);
  const events = await sendAndCollect('sig', { agent: 'h', text: 'crash once' }, done, 180_000);
  assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events.slice(-3)));
  assert.equal(events.at(-1)!.data.text, 'Recovered.');
  const turns = await host.store.listTurns('sig');
  assert.deepEqual(
    turns.map((x) => [x.status, x.errorCode]),
    [
      ['aborted', 'HARNESS_FAILED'],
      ['committed', null],
    ],
  );
  // Bun's crash handler prints its report, then the signal ends it. How far the report gets
  // is Bun's: spawned by Node 24 it stops after its header in 3 of 4 runs here (1,011 of
  // 1,468 bytes, the same outside berth), so the header is what the error must carry.
  assert.match(
    turns[0]!.error!,
    /claude-code exited on signal SIGSEGV; last stderr lines:\n(.|\n)*Bun v\d+\.\d+\.\d+ .*Linux/,
    'the error names the signal and carries the crash report',
  );
  assert.equal(fake.scripted().length, 3, 'the killed try asked for its tool, the retry ran it and answered');
  await waitPromoted(host, 'sig');
  assert.match(await committed(dataDir, 'sig', 'crash-2.txt'), /^try 2: harness \d+ is claude\n$/);
  await assert.rejects(committed(dataDir, 'sig', 'crash-1.txt'), 'the crashed try left no file');
});

test('a harness agent whose image lacks the harness is refused at create, with the command that builds it', async (t) => {
  const { client } = await startTestHost(t);
  const base = await client
    .request('POST', '/v1/agents', {
      name: 'x',
      provider: 'codex',
      model: 'gpt-5-codex',
      image: 'berth-no-such:1',
    })
    .then(
      () => null,
      (err: { code?: string; message?: string; hint?: string }) => err,
    );
  assert.equal(base?.code, 'HARNESS_NOT_IN_IMAGE');
  assert.match(String(base?.hint), /berth image build --with codex/);
});
