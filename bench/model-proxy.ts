/**
 * The gateway's model proxy, against a baseline taken in the same run: the Anthropic SDK
 * calling a local fake provider directly over TCP (baseline) and the same SDK calling it
 * through the gateway over the Unix socket (token and turn checks, secret lookup, header
 * rebuild, the journal lookup, streaming pass-through, usage metering and the journal and
 * usage store writes). Streamed
 * messages with a short tool_use reply, alternated so both see the same machine load.
 */
import Anthropic from '@anthropic-ai/sdk';
import { socketFetch } from '../src/runner/socket-fetch.js';
import type { ScriptStep } from '../test/helpers/fake-models.js';
import { type ModelGateway, startModelGateway } from '../test/helpers/model-gateway.js';
import { type BenchOptions, round, stats } from './harness.js';

/** The Anthropic SDK as a sandbox holds it: the gateway's model proxy over its socket, no retries. */
export function proxiedAnthropic(g: ModelGateway): Anthropic {
  return new Anthropic({
    authToken: g.token(),
    baseURL: 'http://berth-gateway/v1/model/anthropic',
    fetch: socketFetch(g.socketPath),
    maxRetries: 0,
  });
}

export async function modelProxy({ quick }: BenchOptions) {
  const calls = quick ? 50 : 500;
  const step: ScriptStep = { tool: { name: 'bash', input: { command: 'ls -la' } }, text: 'Looking.' };
  const g = await startModelGateway({ provider: 'anthropic', model: 'm' }, []);
  try {
    const direct = new Anthropic({ apiKey: 'k', baseURL: g.fake.url, maxRetries: 0 });
    const proxied = proxiedAnthropic(g);
    let sent = 0;
    const time = async (client: Anthropic) => {
      g.fake.script.push(step);
      // Each request differs: a repeated one would be answered from the gateway's journal.
      const request = {
        model: 'm',
        max_tokens: 100,
        messages: [{ role: 'user' as const, content: `hi ${sent++}` }],
      };
      const t0 = performance.now();
      await client.messages.stream(request).finalMessage();
      return performance.now() - t0;
    };
    for (let i = 0; i < 10; i++) await time(i % 2 ? direct : proxied); // warm both paths
    const directMs: number[] = [];
    const proxiedMs: number[] = [];
    for (let i = 0; i < calls; i++) {
      directMs.push(await time(direct));
      proxiedMs.push(await time(proxied));
    }
    const d = stats(directMs);
    const p = stats(proxiedMs);
    return {
      bench: 'model-proxy',
      calls,
      directMs: d,
      proxiedMs: p,
      overheadP50Ms: round(p.p50 - d.p50),
      overheadP99Ms: round(p.p99 - d.p99),
    };
  } finally {
    await g.close();
  }
}
