import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { ScriptStep, TurnAssignment } from '../core/protocol.js';
import { GatewayError } from './gateway-client.js';
import { PROVIDERS, StepFailed } from './providers.js';
import type { TurnContext } from './turn-context.js';

/** One script turn of message 7 with these steps, in a fresh workspace. */
async function runScript(
  t: { after(fn: () => Promise<void>): void },
  steps: ScriptStep[],
  ctx: Partial<TurnContext>,
) {
  const workspace = await mkdtemp(join(tmpdir(), 'berth-providers-'));
  t.after(() => rm(workspace, { recursive: true, force: true }));
  await mkdir(join(workspace, 'a-dir'));
  const turn: TurnAssignment = {
    turnId: 'turn_t',
    sessionId: 's',
    generation: 1,
    attempt: 1,
    provider: 'script',
    messages: [{ id: 7, text: JSON.stringify({ steps, reply: 'done' }) }],
    limits: { maxOutputBytes: 1 << 20, heartbeatIntervalMs: 2000 },
  };
  const full: TurnContext = {
    workspace,
    gateway: undefined as never,
    progress: async () => {},
    getState: async () => undefined,
    putState: async () => {},
    resident: false,
    ...ctx,
  };
  return PROVIDERS.script(turn, full);
}

test('script: each output names its own message', async (t) => {
  assert.deepEqual(await runScript(t, [{ progress: 'hi' }], {}), [{ text: 'done', inReplyTo: [7] }]);
});

test('script: a step that throws, of whatever kind, fails as that step (STEP_FAILED, with which step)', async (t) => {
  const refused = new GatewayError(413, '{"error":{"code":"STATE_TOO_LARGE"}}');
  const cases: {
    name: string;
    steps: ScriptStep[];
    ctx: Partial<TurnContext>;
    kind: string;
    index: number;
  }[] = [
    {
      name: 'a write onto a directory',
      steps: [{ progress: 'first' }, { write: { path: 'a-dir', content: 'x' } }],
      ctx: {},
      kind: 'write',
      index: 1,
    },
    {
      name: 'a state the gateway refused',
      steps: [{ putState: { key: 'k', value: 1 } }],
      ctx: { putState: async () => Promise.reject(refused) },
      kind: 'putState',
      index: 0,
    },
    {
      name: 'a progress the gateway refused',
      steps: [{ progress: 'p' }],
      ctx: { progress: async () => Promise.reject(new GatewayError(500, 'store away')) },
      kind: 'progress',
      index: 0,
    },
  ];
  for (const c of cases)
    await assert.rejects(
      runScript(t, c.steps, c.ctx),
      (err: unknown) =>
        err instanceof StepFailed &&
        err.code === 'STEP_FAILED' &&
        err.step.messageId === 7 &&
        err.step.index === c.index &&
        err.step.kind === c.kind &&
        err.message.startsWith(`step ${c.index} (${c.kind}) failed: `),
      c.name,
    );
});

test('script: a gateway that revoked the sandbox is not a step failure: the runner exits on it', async (t) => {
  const revoked = new GatewayError(409, '{"error":{"code":"STALE_GENERATION"}}');
  await assert.rejects(
    runScript(t, [{ putState: { key: 'k', value: 1 } }], { putState: async () => Promise.reject(revoked) }),
    (err: unknown) => err === revoked,
  );
});
