/**
 * Egress through the gateway only, from inside real sandboxes: tools
 * reach an allowlisted host through HTTP_PROXY (plain HTTP and CONNECT), anything else is
 * refused with 403 EGRESS_DENIED and never reached, every decision is audited with the
 * agent, session, generation, host and bytes, and a token of an old generation gets 409.
 */
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { type TestContext, test } from 'node:test';
import { startTestHost } from '../helpers/test-host.js';
import { availableTiers, type Tier } from '../helpers/tiers.js';
import { proxyJob, rawConnectJob, sessionTokenJob } from './probes.js';

for (const { tier, skip } of await availableTiers()) {
  test(`egress (${tier}): allowlisted hosts only, through the gateway, audited`, { skip }, (t) =>
    egress(t, tier),
  );
}

async function listen(t: TestContext, name: string): Promise<{ port: number; hits: () => number }> {
  let hits = 0;
  const server: Server = createServer((_req, res) => {
    hits++;
    res.end(`hello from ${name}`);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => server.close());
  return { port: (server.address() as { port: number }).port, hits: () => hits };
}

async function egress(t: TestContext, tier: Tier): Promise<void> {
  const allowed = await listen(t, 'allowed');
  const forbidden = await listen(t, 'forbidden');
  const { host, client, sendAndCollect } = await startTestHost(t);
  await client.request('POST', '/v1/agents', {
    name: 'net',
    provider: 'command',
    isolation: tier,
    egress: [`127.0.0.1:${allowed.port}`],
  });
  const run = async (session: string, job: string) => {
    const events = await sendAndCollect(session, { agent: 'net', text: job }, (e) =>
      ['reply', 'failed'].includes(e.type),
    );
    assert.equal(events.at(-1)?.type, 'reply', JSON.stringify(events.at(-1)));
    return String(events.at(-1)!.data.text);
  };

  const ok = `127.0.0.1:${allowed.port}`;
  const no = `127.0.0.1:${forbidden.port}`;
  const out = JSON.parse(
    await run('e1', proxyJob([`http://${ok}/x`, `http://${no}/x`], [ok, no, 'example.com:443'])),
  );
  assert.deepEqual(out, {
    [`GET http://${ok}/x`]: '200 hello from allowed',
    [`GET http://${no}/x`]: `403 ${JSON.stringify({
      error: {
        code: 'EGRESS_DENIED',
        message: `Agent net may not connect to ${no} (not in its egress allowlist)`,
        hint: 'The sandbox may reach only the host:port entries of its agent egress allowlist; add the target to the agent (egress) if it should be reachable.',
      },
    })}`,
    [`CONNECT ${ok}`]: '200 hello from allowed',
    [`CONNECT ${no}`]: '403',
    'CONNECT example.com:443': '403',
  });
  assert.equal(allowed.hits(), 2);
  assert.equal(forbidden.hits(), 0, 'a target off the allowlist is never connected to');

  const view = (await host.store.getSessionView('e1', Date.now()))!;
  const audit = (await host.store.listAudit(0, 1000)).filter((a) => a.kind.startsWith('egress-'));
  const rows: Record<string, unknown>[] = audit.map((a) => ({ kind: a.kind, ...(a.data as object) }));
  const allowedRows = rows.filter((r) => r.kind === 'egress-allowed');
  assert.equal(allowedRows.length, 2);
  for (const r of allowedRows) {
    assert.equal(r.agent, 'net');
    assert.equal(r.host, '127.0.0.1');
    assert.equal(r.port, allowed.port);
    assert.ok((r.bytesUp as number) > 0 && (r.bytesDown as number) > 0, JSON.stringify(r));
  }
  assert.equal(rows.filter((r) => r.kind === 'egress-denied').length, 3);
  assert.ok(audit.every((a) => a.sessionId === 'e1' && (a.generation ?? 0) <= view.generation));

  // An old generation's token on the gateway's CONNECT: refused, audited, nothing reached.
  const oldToken = (await run('e2', sessionTokenJob('/run/berth/gateway.sock'))).trim();
  const first = (await host.store.getSessionView('e2', Date.now()))!;
  await host.docker
    .getContainer(first.sandbox!)
    .kill()
    .catch(() => undefined);
  for (let i = 0; i < 200 && (await host.store.getSessionView('e2', Date.now()))?.leaseOwner; i++)
    await new Promise((r) => setTimeout(r, 50));
  const line = await run('e2', rawConnectJob('/run/berth/gateway.sock', oldToken, ok));
  assert.equal(line.trim(), 'HTTP/1.1 409 STALE_GENERATION');
  assert.equal(allowed.hits(), 2);
  const stale = (await host.store.listAudit(0, 1000)).filter(
    (a) => a.kind === 'stale-generation' && a.sessionId === 'e2',
  );
  assert.equal(stale.length, 1);
  assert.equal(stale[0]!.generation, first.generation);
}
