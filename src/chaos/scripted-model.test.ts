/**
 * The scripted model, driven by the official Anthropic SDK (streaming, as berth's loop
 * calls it): a long turn's plan is answered with one bash tool call per step, whose
 * commands, run by a shell, leave exactly what the plan's appends write; then the plan's
 * reply. Every call is logged by its key, and a call asked again once answered is redone.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import Anthropic from '@anthropic-ai/sdk';
import { redoneCalls } from './redone-calls.js';
import { startScriptedModel } from './scripted-model.js';
import { LONG_TURN_STEPS, longTurnPlan, STEPS_FILE } from './workload.js';

test('the scripted model walks a long turn through its tool calls to its reply, logging each call by its key', async (t) => {
  const model = await startScriptedModel();
  const dir = await mkdtemp(join(tmpdir(), 'berth-scripted-model-'));
  t.after(async () => {
    await model.close();
    await rm(dir, { recursive: true, force: true });
  });
  const client = new Anthropic({ apiKey: 'sk-test', baseURL: model.url, maxRetries: 0 });
  const plan = longTurnPlan('chaos-t-long-1', 1);
  const history: Anthropic.MessageParam[] = [
    { role: 'user', content: [{ type: 'text', text: JSON.stringify(plan) }] },
  ];
  const ask = () => client.messages.stream({ model: 'm', max_tokens: 100, messages: history }).finalMessage();
  let reply = '';
  for (let calls = 0; ; calls++) {
    assert.ok(calls <= LONG_TURN_STEPS, 'the turn ends after its steps');
    const message = await ask();
    history.push({ role: 'assistant', content: message.content });
    const use = message.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
    if (!use) {
      assert.equal(message.stop_reason, 'end_turn');
      reply = message.content.map((b) => (b.type === 'text' ? b.text : '')).join('');
      break;
    }
    assert.equal(use.name, 'bash');
    const { command } = use.input as { command: string };
    await promisify(execFile)('/bin/sh', ['-c', command], { cwd: dir });
    history.push({
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: use.id, content: 'exit code 0' }],
    });
  }
  assert.equal(reply, plan.reply);
  assert.equal(
    await readFile(join(dir, STEPS_FILE), 'utf8'),
    Array.from({ length: LONG_TURN_STEPS }, (_, i) => `step-${i + 1}\n`).join(''),
  );
  assert.deepEqual(
    model.calls.map((c) => [c.session, c.turn, c.index, c.answeredAt !== null]),
    Array.from({ length: LONG_TURN_STEPS + 1 }, (_, i) => ['chaos-t-long-1', 1, i, true]),
  );
  assert.deepEqual(redoneCalls(model.calls), []);
  // The last call again, as a resume whose answer was not journalled would ask it: the same answer, one call redone.
  history.pop();
  const again = await ask();
  assert.deepEqual(
    again.content.map((b) => (b.type === 'text' ? b.text : b.type)),
    [plan.reply],
  );
  assert.deepEqual(
    redoneCalls(model.calls).map((c) => c.index),
    [LONG_TURN_STEPS],
  );
});

test('a request with no plan in its turn message is refused in the API error shape', async (t) => {
  const model = await startScriptedModel();
  t.after(() => model.close());
  const client = new Anthropic({ apiKey: 'sk-test', baseURL: model.url, maxRetries: 0 });
  await assert.rejects(
    client.messages.create({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] }),
    (err: unknown) => err instanceof Anthropic.BadRequestError && /no chaos plan/.test(err.message),
  );
});
