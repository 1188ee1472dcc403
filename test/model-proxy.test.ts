/**
 * The gateway's model proxy with the official SDKs on the sandbox side (over the Unix
 * socket, with the runner's fetch) and fake providers speaking the real wire protocols
 * upstream, against a real SQLite store and secret store: the key is added in transit
 * and the sandbox token never leaves, responses stream through, usage is recorded,
 * retries follow the SDK's policy, and budgets, stale generations, unknown models and
 * missing keys are refused before anything reaches the provider.
 */
import assert from 'node:assert/strict';
import { type TestContext, test } from 'node:test';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import type { AgentSpecInput } from '../src/core/index.js';
import { socketFetch } from '../src/runner/socket-fetch.js';
import type { ScriptStep } from './helpers/fake-models.js';
import { UPSTREAM_KEY as KEY, startModelGateway } from './helpers/model-gateway.js';

async function setUp(
  t: TestContext,
  agent: Omit<AgentSpecInput, 'name'>,
  script: ScriptStep[],
  checkpoint?: (turnId: string) => Promise<unknown>,
) {
  const { store, fake, turn, socketPath, token, close } = await startModelGateway(agent, script, checkpoint);
  t.after(close);
  const sdk = {
    anthropic: (generation?: number) =>
      new Anthropic({
        authToken: token(generation),
        baseURL: 'http://berth-gateway/v1/model/anthropic',
        fetch: socketFetch(socketPath),
        maxRetries: 2,
      }),
    openai: () =>
      new OpenAI({
        apiKey: token(),
        baseURL: 'http://berth-gateway/v1/model/openai',
        fetch: socketFetch(socketPath),
        maxRetries: 2,
      }),
  };
  return { store, fake, turn, sdk, token, socketPath };
}

const ask = { max_tokens: 100, messages: [{ role: 'user' as const, content: 'hello' }] };
/** Another request: the same one again in a turn is answered from the journal. */
const askAgain = { max_tokens: 100, messages: [{ role: 'user' as const, content: 'hello again' }] };

test('anthropic: streamed and plain calls get the key upstream, never the sandbox token; usage recorded', async (t) => {
  const { store, fake, turn, sdk, token } = await setUp(t, { provider: 'anthropic', model: 'claude-x' }, [
    { text: 'streamed hello' },
    { tool: { name: 'bash', input: { command: 'ls' } } },
  ]);
  const client = sdk.anthropic();
  const streamed = await client.messages.stream({ model: 'claude-x', ...ask }).finalMessage();
  assert.deepEqual(
    streamed.content.map((b) => (b.type === 'text' ? b.text : b.type)),
    ['streamed hello'],
  );
  const plain = await client.messages.create({ model: 'claude-x', ...ask });
  assert.equal(plain.stop_reason, 'tool_use');
  assert.deepEqual(plain.content[0], {
    type: 'tool_use',
    id: 'toolu_2',
    name: 'bash',
    input: { command: 'ls' },
  });

  for (const r of fake.requests) {
    assert.equal(r.headers['x-api-key'], KEY);
    assert.equal(r.headers.authorization, undefined);
    assert.ok(!JSON.stringify(r.headers).includes(token()), 'the sandbox token stays in the gateway');
  }
  const usage = await store.sumModelUsage({ turnId: turn.id });
  const reported = fake.requests.reduce((n, r) => n + r.usage.input + r.usage.output, 0);
  assert.equal(usage.calls, 2);
  assert.equal(usage.inputTokens + usage.outputTokens, reported);
  assert.ok(reported > 0);
});

test('each call is checkpointed before it goes upstream (a failed checkpoint skipped); a repeated request is answered from the journal, the same bytes, unpaid', async (t) => {
  const upstreamAtCheckpoint: number[] = [];
  let fail = false;
  const { store, fake, turn, socketPath, token } = await setUp(
    t,
    { provider: 'anthropic', model: 'claude-x' },
    [{ text: 'first answer' }, { text: 'second answer' }],
    async () => {
      upstreamAtCheckpoint.push(fake.requests.length);
      if (fail) throw new Error('blob store away');
    },
  );
  const call = async (content: string) => {
    const res = await socketFetch(socketPath)('http://berth-gateway/v1/model/anthropic/v1/messages', {
      method: 'POST',
      headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'claude-x',
        max_tokens: 100,
        stream: true,
        messages: [{ role: 'user', content }],
      }),
    });
    return { status: res.status, type: res.headers.get('content-type'), text: await res.text() };
  };
  const first = await call('one');
  assert.equal(first.status, 200);
  assert.match(first.text, /"text":"first "/);
  const again = await call('one');
  assert.deepEqual(again, first, 'the journalled answer, byte for byte');
  assert.equal(fake.scripted().length, 1, 'the repeat never reached the provider');
  fail = true;
  const second = await call('two');
  assert.match(second.text, /"text":"second "/, 'a failed checkpoint is skipped, the call goes on');
  assert.deepEqual(upstreamAtCheckpoint, [0, 1, 1], 'each checkpoint is taken before its call is forwarded');
  assert.equal((await store.sumModelUsage({ turnId: turn.id })).calls, 2, 'each call counted once');
});

test('codex (Responses API): streamed and plain responses pass with the key, usage read from response.completed; chat completions too', async (t) => {
  const { store, fake, turn, sdk } = await setUp(t, { provider: 'codex', model: 'gpt-x' }, [
    { text: 'streamed hello' },
    { tool: { name: 'exec_command', input: { cmd: 'ls' } } },
    { text: 'chat' },
  ]);
  const client = sdk.openai();
  const stream = await client.responses.create({ model: 'gpt-x', input: 'hello', stream: true });
  let text = '';
  for await (const event of stream) if (event.type === 'response.output_text.delta') text += event.delta;
  assert.equal(text, 'streamed hello');
  const plain = await client.responses.create({ model: 'gpt-x', input: 'hello' });
  assert.deepEqual(
    plain.output.map((o) => (o.type === 'function_call' ? [o.name, o.arguments] : o.type)),
    [['exec_command', '{"cmd":"ls"}']],
  );
  const chat = await client.chat.completions.create({
    model: 'gpt-x',
    messages: [{ role: 'user', content: 'hi' }],
  });
  assert.equal(chat.choices[0]?.message.content, 'chat');
  assert.equal(fake.requests[0]!.body.stream_options, undefined, 'a Responses stream is sent as it is');
  for (const r of fake.requests) assert.equal(r.headers.authorization, `Bearer ${KEY}`);
  const usage = await store.sumModelUsage({ turnId: turn.id });
  assert.equal(usage.calls, 3);
  assert.equal(
    usage.inputTokens + usage.outputTokens,
    fake.requests.reduce((n, r) => n + r.usage.input + r.usage.output, 0),
  );
  await assert.rejects(
    sdk.anthropic().messages.create({ model: 'gpt-x', ...ask }),
    (err: Error) => (err as { status?: number }).status === 404,
    'a codex agent has no Anthropic route',
  );
});

test('anthropic: 429 and 529 are retried by the SDK, a lasting 500 ends in an error, malformed bodies fail', async (t) => {
  const { fake, sdk } = await setUp(t, { provider: 'anthropic', model: 'claude-x' }, [
    { status: 429, retryAfterMs: 5 },
    { status: 529, retryAfterMs: 5 },
    { text: 'after retries' },
    { status: 500, retryAfterMs: 5 },
    { status: 500, retryAfterMs: 5 },
    { status: 500, retryAfterMs: 5 },
    { malformed: true },
    { malformed: true },
  ]);
  const client = sdk.anthropic();
  const ok = await client.messages.stream({ model: 'claude-x', ...ask }).finalMessage();
  assert.equal(ok.content[0]?.type === 'text' && ok.content[0].text, 'after retries');
  await assert.rejects(client.messages.create({ model: 'claude-x', ...ask }), (err: Error) => {
    assert.match(err.message, /500/);
    return true;
  });
  assert.equal(fake.requests.length, 6, 'two retries of the 500');
  await assert.rejects(client.messages.create({ model: 'claude-x', ...askAgain }));
  await assert.rejects(client.messages.stream({ model: 'claude-x', ...askAgain }).finalMessage());
});

test('refused before the provider: another model, a stale generation (audited), a missing key', async (t) => {
  const { store, fake, sdk } = await setUp(t, { provider: 'anthropic', model: 'claude-x' }, [{ text: 'x' }]);
  await assert.rejects(
    sdk.anthropic().messages.create({ model: 'claude-expensive', ...ask }),
    (err: Error) => {
      assert.match(err.message, /may only call model claude-x/);
      return true;
    },
  );
  await assert.rejects(sdk.anthropic(0).messages.create({ model: 'claude-x', ...ask }), (err: Error) => {
    assert.equal((err as { status?: number }).status, 409);
    assert.match(err.message, /STALE_GENERATION/);
    return true;
  });
  const audit = await store.listAudit(0, 10);
  assert.ok(audit.some((a) => a.kind === 'stale-generation' && a.generation === 0));
  assert.equal(fake.requests.length, 0);

  const noKey = await setUp(t, { provider: 'anthropic', model: 'claude-x', secret: 'absent' }, [
    { text: 'x' },
  ]);
  await assert.rejects(noKey.sdk.anthropic().messages.create({ model: 'claude-x', ...ask }), (err: Error) => {
    assert.equal((err as { status?: number }).status, 503);
    assert.match(err.message, /No secret absent on the host/);
    return true;
  });
  assert.equal(noKey.fake.requests.length, 0);
});

test('budget: tokens per hour are enforced with a clear 429 the SDK does not retry, and audited', async (t) => {
  const { store, fake, sdk } = await setUp(
    t,
    { provider: 'anthropic', model: 'claude-x', budget: { tokensPerHour: 10 } },
    [{ text: 'a long enough answer to pass the budget' }, { text: 'never sent' }],
  );
  const client = sdk.anthropic();
  await client.messages.create({ model: 'claude-x', ...ask });
  await assert.rejects(client.messages.create({ model: 'claude-x', ...askAgain }), (err: Error) => {
    assert.equal((err as { status?: number }).status, 429);
    assert.match(err.message, /MODEL_BUDGET_EXCEEDED/);
    assert.match(err.message, /Agent a used \d+ of its 10 tokens in the last hour/);
    return true;
  });
  assert.equal(fake.requests.length, 1, 'refused at the gateway, not retried');
  assert.ok((await store.listAudit(0, 10)).some((a) => a.kind === 'model-budget-exceeded'));
});

test('openai: streamed tool calls pass through, usage is asked for and recorded, bearer key upstream', async (t) => {
  const { store, fake, turn, sdk } = await setUp(t, { provider: 'openai', model: 'gpt-x' }, [
    { tool: { name: 'write_file', input: { path: 'a.txt', content: 'A' } } },
    { status: 429, retryAfterMs: 5 },
    { text: 'plain answer' },
  ]);
  const client = sdk.openai();
  const stream = await client.chat.completions.create({
    model: 'gpt-x',
    messages: [{ role: 'user', content: 'go' }],
    stream: true,
  });
  let args = '';
  let name = '';
  let usage: unknown;
  for await (const chunk of stream) {
    for (const d of chunk.choices[0]?.delta.tool_calls ?? []) {
      name += d.function?.name ?? '';
      args += d.function?.arguments ?? '';
    }
    usage ??= chunk.usage ?? undefined;
  }
  assert.equal(name, 'write_file');
  assert.deepEqual(JSON.parse(args), { path: 'a.txt', content: 'A' });
  assert.ok(usage, 'the proxy asked for the usage chunk');
  assert.deepEqual(fake.requests[0]?.body.stream_options, { include_usage: true });
  const plain = await client.chat.completions.create({
    model: 'gpt-x',
    messages: [{ role: 'user', content: 'go' }],
  });
  assert.equal(plain.choices[0]?.message.content, 'plain answer');
  for (const r of fake.requests) assert.equal(r.headers.authorization, `Bearer ${KEY}`);
  const recorded = await store.sumModelUsage({ turnId: turn.id });
  assert.equal(recorded.calls, 2, 'the 429 costs nothing');
  const reported = fake.requests.reduce((n, r) => n + r.usage.input + r.usage.output, 0);
  assert.equal(recorded.inputTokens + recorded.outputTokens, reported);
});
