/**
 * The harness adapters' reading of their harness, on the event shapes each CLI prints
 * (captured from the pinned versions): progress texts, the reply and its usage, errors
 * as HARNESS_FAILED; and how each resumes: Claude Code by a transcript id derived from
 * the session, Codex and opencode by the id they reported, kept in their state dir.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { claudeCode, transcriptId } from './claude-code-harness.js';
import { codex, codexConfig } from './codex-harness.js';
import { HarnessError } from './harness-process.js';
import type { HarnessAdapter, HarnessInput } from './harness-provider.js';
import { CONTINUATION } from './harness-provider.js';
import { modelEndpointUrl } from './model-endpoint.js';
import { opencode } from './opencode-harness.js';

async function input(t: TestContext, adapter: HarnessAdapter): Promise<HarnessInput> {
  const workspace = await mkdtemp(join(tmpdir(), 'berth-harness-'));
  t.after(() => rm(workspace, { recursive: true, force: true }));
  const stateDir = join(workspace, '.berth', adapter.name);
  await mkdir(stateDir, { recursive: true });
  return {
    settings: { model: 'm-1', timeoutMs: 1000, instructions: '' },
    prompt: 'do it',
    sessionId: 's1',
    workspace,
    stateDir,
    endpoint: modelEndpointUrl,
    resumedMidTurn: false,
  };
}

test('claude-code: a transcript id per session, started then resumed; events, reply, usage and an error result', async (t) => {
  const id = transcriptId('s1');
  assert.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.equal(transcriptId('s1'), id);
  assert.notEqual(transcriptId('s2'), id);

  const i = await input(t, claudeCode);
  const first = await claudeCode.begin(i);
  assert.deepEqual(first.argv.slice(-2), ['--session-id', id]);
  assert.equal(first.stdin, 'do it', 'the prompt goes on stdin, never as an argument');
  assert.ok(!first.argv.includes('do it'));
  assert.equal(first.env.ANTHROPIC_BASE_URL, 'http://127.0.0.1:3129/anthropic');
  assert.equal(first.env.CLAUDE_CONFIG_DIR, i.stateDir);
  assert.equal(first.env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
  assert.deepEqual(
    await first.onEvent({
      type: 'assistant',
      message: {
        content: [
          { type: 'text', text: 'On it.' },
          { type: 'tool_use', id: 't1', name: 'Bash' },
        ],
      },
    }),
    ['On it.', 'tool Bash started'],
  );
  assert.deepEqual(
    await first.onEvent({
      type: 'user',
      message: { content: [{ type: 'tool_result', tool_use_id: 't1', is_error: true }] },
    }),
    ['tool Bash finished with an error'],
  );
  await first.onEvent({
    type: 'result',
    subtype: 'success',
    is_error: false,
    result: 'Done.',
    num_turns: 2,
    usage: { input_tokens: 10, cache_read_input_tokens: 5, output_tokens: 3 },
  });
  const out = first.finish();
  assert.equal(out.text, 'Done.');
  assert.deepEqual((out.data as { usage: unknown }).usage, { inputTokens: 15, outputTokens: 3 });

  // The transcript exists (committed by turn 1): turn 2 resumes it.
  const projects = join(i.stateDir, 'projects', i.workspace.replace(/\//g, '-'));
  await mkdir(projects, { recursive: true });
  await writeFile(join(projects, `${id}.jsonl`), '{}\n');
  const second = await claudeCode.begin(i);
  assert.deepEqual(second.argv.slice(-2), ['--resume', id]);
  assert.equal(second.stdin, 'do it');
  // A retry resumed from a model-call checkpoint: the transcript has the prompt already.
  const midTurn = await claudeCode.begin({ ...i, resumedMidTurn: true });
  assert.deepEqual([midTurn.argv.slice(-2), midTurn.stdin], [['--resume', id], CONTINUATION]);
  await second.onEvent({ type: 'result', subtype: 'error_max_turns', is_error: true, result: 'too many' });
  assert.throws(
    () => second.finish(),
    (e: unknown) => e instanceof HarnessError && e.code === 'HARNESS_FAILED',
  );
  const none = await claudeCode.begin(i);
  assert.throws(() => none.finish(), /exited without a result/);
});

test('codex: its config names the endpoint and turns updates and analytics off; the thread id it reports is kept and resumed', async (t) => {
  const config = codexConfig('gpt-x', 'http://127.0.0.1:3129/openai');
  assert.match(config, /^model = "gpt-x"$/m);
  assert.match(config, /^base_url = "http:\/\/127\.0\.0\.1:3129\/openai"$/m);
  assert.match(config, /^wire_api = "responses"$/m);
  assert.match(config, /^check_for_update_on_startup = false$/m);
  assert.match(config, /\[analytics\]\nenabled = false/);

  const i = await input(t, codex);
  const first = await codex.begin(i);
  assert.ok(!first.argv.includes('resume'));
  assert.equal(first.argv.at(-1), '-', 'the prompt is read from stdin');
  assert.equal(first.stdin, 'do it');
  assert.equal(
    await readFile(join(i.stateDir, 'config.toml'), 'utf8'),
    codexConfig('m-1', modelEndpointUrl('openai')),
  );
  await first.onEvent({ type: 'thread.started', thread_id: 'th-1' });
  assert.deepEqual(
    await first.onEvent({ type: 'item.started', item: { type: 'command_execution', command: 'ls' } }),
    ['tool command_execution started: ls'],
  );
  assert.deepEqual(
    await first.onEvent({
      type: 'item.completed',
      item: { type: 'command_execution', exit_code: 2, status: 'failed' },
    }),
    ['tool command_execution finished with an error'],
  );
  assert.deepEqual(
    await first.onEvent({ type: 'item.completed', item: { type: 'agent_message', text: 'Hi.' } }),
    ['Hi.'],
  );
  await first.onEvent({ type: 'turn.completed', usage: { input_tokens: 7, output_tokens: 2 } });
  assert.equal(first.finish().text, 'Hi.');
  assert.equal(await readFile(join(i.stateDir, 'berth-thread-id'), 'utf8'), 'th-1\n');

  const second = await codex.begin(i);
  assert.deepEqual(second.argv.slice(-3), ['resume', 'th-1', '-']);
  await second.onEvent({ type: 'turn.failed', error: { message: 'stream disconnected' } });
  assert.throws(() => second.finish(), /HARNESS_FAILED|codex: stream disconnected/);
});

test('opencode: the session id it reports is kept and continued; text, tools, tokens, errors', async (t) => {
  const i = await input(t, opencode);
  const first = await opencode.begin(i);
  assert.ok(!first.argv.includes('--session'));
  const config = JSON.parse(await readFile(join(i.stateDir, 'config', 'opencode', 'opencode.json'), 'utf8'));
  assert.equal(config.model, 'anthropic/m-1');
  assert.equal(config.small_model, 'anthropic/m-1', 'titles on the agent model too');
  assert.equal(config.provider.anthropic.options.baseURL, 'http://127.0.0.1:3129/anthropic/v1');
  assert.deepEqual(
    await first.onEvent({
      type: 'tool_use',
      sessionID: 'ses_1',
      part: { tool: 'bash', state: { status: 'completed' } },
    }),
    ['tool bash finished'],
  );
  await first.onEvent({ type: 'text', sessionID: 'ses_1', part: { text: 'Done.' } });
  await first.onEvent({
    type: 'step_finish',
    sessionID: 'ses_1',
    part: { tokens: { input: 4, output: 2, cache: { read: 1 } } },
  });
  const out = first.finish();
  assert.equal(out.text, 'Done.');
  assert.deepEqual((out.data as { usage: unknown }).usage, { inputTokens: 5, outputTokens: 2 });
  const second = await opencode.begin(i);
  assert.deepEqual(second.argv.slice(-2), ['--session', 'ses_1']);
  assert.equal(second.stdin, 'do it');
  await second.onEvent({ type: 'error', error: { name: 'APIError' } });
  assert.throws(() => second.finish(), /opencode: \{"name":"APIError"\}/);
});
