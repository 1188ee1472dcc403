/**
 * The harnesses (Claude Code, Codex, opencode in their agent images) against berth's own
 * `anthropic` loop as the baseline, in the same run and on the same host: for each, a
 * fresh session per message (warm pool on: after the first miss each image has its own
 * pool), the model asking for one shell call and then answering. Per provider: message →
 * turn started, message → reply, the number of model calls per turn; per image: its size.
 * Providers take turns round by round, so all of them see the same machine load.
 */
import { join } from 'node:path';
import type { HarnessName } from '../src/core/index.js';
import { resolveImage } from '../src/host/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { type ScriptStep, startFakeAnthropic, startFakeOpenAI } from '../test/helpers/fake-models.js';
import { type BenchOptions, benchHost, stats, timedMessage } from './harness.js';

const SHELL: Record<'anthropic' | HarnessName, (command: string) => ScriptStep> = {
  anthropic: (command) => ({ tool: { name: 'bash', input: { command } } }),
  'claude-code': (command) => ({ tool: { name: 'Bash', input: { command, description: 'run' } } }),
  codex: (command) => ({ tool: { name: 'exec_command', input: { cmd: command } } }),
  opencode: (command) => ({ tool: { name: 'bash', input: { command, description: 'run' } } }),
};
const MODEL = {
  anthropic: 'claude-sonnet-4-5',
  'claude-code': 'claude-sonnet-4-5',
  codex: 'gpt-5-codex',
  opencode: 'claude-sonnet-4-5',
};

export async function harnesses({ quick }: BenchOptions) {
  const rounds = quick ? 2 : 5;
  const anthropic = await startFakeAnthropic([]);
  const openai = await startFakeOpenAI([]);
  anthropic.side = (body) =>
    JSON.stringify(body.system ?? '').includes('title generator') ? 'Title' : undefined;
  const h = await benchHost(
    { ANTHROPIC_BASE_URL: anthropic.url, OPENAI_BASE_URL: openai.url, BERTH_IDLE_TIMEOUT: '0' },
    1,
  );
  const providers = Object.keys(SHELL) as (keyof typeof SHELL)[];
  const times = Object.fromEntries(
    providers.map((p) => [p, { started: [] as number[], reply: [] as number[] }]),
  );
  const calls: Record<string, number> = {};
  const images: Record<string, { image: string; sizeMiB: number }> = {};
  try {
    await new SecretStore({ path: join(h.config.dataDir, 'secrets.json'), key: h.config.secretKey }).set(
      'anthropic',
      'sk-bench',
    );
    await new SecretStore({ path: join(h.config.dataDir, 'secrets.json'), key: h.config.secretKey }).set(
      'openai',
      'sk-bench',
    );
    for (const p of providers) {
      const agent = await h.client.request<{ image?: string }>('POST', '/v1/agents', {
        name: p,
        provider: p,
        model: MODEL[p],
        memoryMb: 1024,
      });
      const image = agent.image ?? (await resolveImage(h.host.docker, h.config));
      const info = await h.host.docker.getImage(image).inspect();
      images[p] = { image, sizeMiB: Math.round(info.Size / 2 ** 20) };
    }
    for (let round = 0; round < rounds; round++) {
      for (const p of providers) {
        const fake = p === 'codex' ? openai : anthropic;
        const before = fake.requests.length;
        fake.script.push(SHELL[p]('true'), { text: 'done' });
        const t = await timedMessage(h.client, `${p}-${round}`, 'Run true, then say done.', p);
        if (t.text !== 'done') throw new Error(`${p} replied ${JSON.stringify(t.text)}`);
        times[p]!.started.push(t.startedMs);
        times[p]!.reply.push(t.replyMs);
        calls[p] = fake.requests.length - before;
      }
    }
  } finally {
    await h.close();
    await anthropic.close();
    await openai.close();
  }
  const base = stats(times.anthropic!.reply);
  return {
    bench: 'harnesses',
    rounds,
    baseline: { provider: 'anthropic', startedMs: stats(times.anthropic!.started), replyMs: base },
    providers: Object.fromEntries(
      providers.map((p) => {
        const reply = stats(times[p]!.reply);
        return [
          p,
          {
            startedMs: stats(times[p]!.started),
            replyMs: reply,
            replyVsAnthropic: Math.round((reply.p50 / base.p50) * 100) / 100,
            modelCallsPerTurn: calls[p],
            ...images[p],
          },
        ];
      }),
    ),
  };
}
