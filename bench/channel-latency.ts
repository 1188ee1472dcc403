/**
 * Each chat channel's latency, against a baseline taken on the same host just before:
 *  - baseline: the same warm `command` turn posted over REST (POST → reply event);
 *  - the platform (bench/channel-drivers.ts: Telegram, Slack Events API, Slack Socket Mode,
 *    Discord): its receipt of a user's message → its receipt of the reply, one message
 *    after the other in one chat (per-chat: one warm session). Telegram's receipt is when
 *    berth's long poll takes the update; Slack's when its signed request starts or its
 *    Socket Mode envelope is sent; Discord's when its Gateway dispatch is sent.
 * A host a platform, as each platform's API URL is one setting of the host.
 */
import { hostPaths } from '../src/core/index.js';
import { SecretStore } from '../src/secrets/index.js';
import { type ChannelPlatformName, channelDrivers, until } from './channel-drivers.js';
import { type BenchOptions, benchHost, round, stats, timedMessage } from './harness.js';

export async function channelLatency({ quick }: BenchOptions) {
  const messages = quick ? 20 : 50;
  const result: Record<string, unknown> = { bench: 'channel-latency' };
  for (const name of Object.keys(channelDrivers) as ChannelPlatformName[]) {
    result[name] = await platformLatency(name, messages);
  }
  return result;
}

async function platformLatency(name: ChannelPlatformName, messages: number) {
  const d = await channelDrivers[name]();
  const h = await benchHost({ BERTH_IDLE_TIMEOUT: '10m', ...d.env }, 2);
  try {
    const secrets = new SecretStore({ path: hostPaths(h.config.dataDir).secretsFile, key: '' });
    for (const [k, v] of Object.entries(d.secrets)) await secrets.set(k, v);
    const api: number[] = [];
    await timedMessage(h.client, 'api', 'true'); // boots its sandbox
    for (let i = 0; i < messages; i++) api.push((await timedMessage(h.client, 'api', 'echo hi')).replyMs);
    const to = { berthUrl: h.host.url, name: 'bench' };
    await h.client.request('POST', '/v1/channels', { ...d.channel, name: to.name, agent: 'b' });
    await d.ready();
    const channel: number[] = [];
    for (let i = 0; i <= messages; i++) {
      const said = await d.say(0, 'echo hi', to);
      await until(`${name} reply`, () => said.repliedAt() !== undefined);
      // The first one boots the chat's sandbox: not counted.
      if (i > 0) channel.push(said.repliedAt()! - said.receivedAt()!);
    }
    const a = stats(api);
    const c = stats(channel);
    return { baselineApiWarmMessageToReplyMs: a, messageToReplyMs: c, ratioToApiP50: round(c.p50 / a.p50) };
  } finally {
    await h.close();
    await d.close();
  }
}
