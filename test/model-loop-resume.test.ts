/**
 * berth's own model loops resumed from a model-call checkpoint, against the gateway's model
 * proxy and a fake provider speaking the real protocol: a turn whose workspace holds the
 * checkpointed call's message list (.berth/model-call.json) and whose assignment says it
 * resumed sends that list first, at that step, instead of the turn's prompt; a turn that
 * did not resume (or of other messages) starts from the prompt. The file is gone at the end.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { TurnAssignment } from '../src/core/index.js';
import { runAnthropic } from '../src/runner/anthropic-provider.js';
import { GatewayClient } from '../src/runner/gateway-client.js';
import { MODEL_CALL_FILE } from '../src/runner/model-turn.js';
import { runOpenAI } from '../src/runner/openai-provider.js';
import { startModelGateway } from './helpers/model-gateway.js';

const CHECKPOINTED = {
  anthropic: [
    { role: 'user', content: [{ type: 'text', text: 'go' }] },
    {
      role: 'assistant',
      content: [{ type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } }],
    },
    {
      role: 'user',
      content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'exit code 0', is_error: false }],
    },
  ],
  openai: [
    { role: 'user', content: 'go' },
    {
      role: 'assistant',
      content: null,
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'bash', arguments: '{"command":"ls"}' } },
      ],
    },
    { role: 'tool', tool_call_id: 'call_1', content: 'exit code 0' },
  ],
};
const RUN = { anthropic: runAnthropic, openai: runOpenAI };

for (const provider of ['anthropic', 'openai'] as const)
  test(`${provider} loop: resumed from a model-call checkpoint, it sends the checkpointed messages at their step; otherwise the prompt`, async (t) => {
    const g = await startModelGateway({ provider, model: 'm' }, [{ text: 'resumed' }, { text: 'fresh' }]);
    t.after(() => g.close());
    const workspace = await mkdtemp(join(tmpdir(), 'berth-loop-resume-'));
    t.after(() => rm(workspace, { recursive: true, force: true }));
    const messageId = g.turn.messageIds[0]!;
    const ctx = {
      workspace,
      gateway: new GatewayClient(g.socketPath, g.token()),
      progress: async () => {},
      getState: async () => undefined,
      putState: async () => {},
      resident: false,
    };
    const turn: TurnAssignment = {
      turnId: g.turn.id,
      sessionId: 's',
      generation: 1,
      attempt: 2,
      provider,
      messages: [{ id: messageId, text: 'go' }],
      limits: { maxOutputBytes: 1 << 20, heartbeatIntervalMs: 1000 },
      // maxSteps 2: the resumed loop is at step 1, so it has one call left.
      model: { model: 'm', maxTokens: 100, maxSteps: 2, toolTimeoutMs: 1000, instructions: '' },
      checkpoint: { count: 2, label: 'model-call' },
    };
    const file = join(workspace, MODEL_CALL_FILE);
    const checkpointed = { provider, messageIds: [messageId], step: 1, messages: CHECKPOINTED[provider] };
    await mkdir(join(workspace, '.berth'));
    await writeFile(file, JSON.stringify(checkpointed));

    const resumed = await RUN[provider](turn, ctx);
    assert.equal(resumed[0]?.text, 'resumed');
    assert.deepEqual(
      g.fake.requests[0]!.body.messages,
      CHECKPOINTED[provider],
      'the checkpointed call, as it was',
    );
    await assert.rejects(readFile(file), 'the loop file goes before the commit');

    await writeFile(file, JSON.stringify(checkpointed));
    const { checkpoint: _, ...notResumed } = turn;
    const fresh = await RUN[provider](notResumed, ctx);
    assert.equal(fresh[0]?.text, 'fresh');
    const first = g.fake.requests[1]!.body.messages as { role: string }[];
    assert.deepEqual(
      first.map((m) => m.role),
      ['user'],
      'a turn that did not resume starts from its prompt',
    );
  });
