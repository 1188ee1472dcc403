import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { isBerthError, type Message, type SessionView } from '../core/index.js';
import { Berth, type Posted } from './berth.js';

/** A real HTTP server that answers the session's event stream with these events, then ends it. */
async function eventServer(t: { after(fn: () => void): void }, events: { type: string; data: unknown }[]) {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const [i, e] of events.entries())
      res.write(`id: ${i + 2}\nevent: ${e.type}\ndata: ${JSON.stringify(e.data)}\n\n`);
    res.end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  return new Berth({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
}

const posted = (id: number): Posted => ({
  message: { id } as Message,
  session: {} as SessionView,
  eventId: 1,
});

test('waitForReply: the reply to another message of the same turn passes by; its own reply is returned with what it answers', async (t) => {
  const berth = await eventServer(t, [
    { type: 'started', data: { turnId: 'turn_a', attempt: 1 } },
    {
      type: 'reply',
      data: { messageId: 10, inReplyTo: [2], scope: 'message', text: 'reply-B', data: { exitCode: 3 } },
    },
    {
      type: 'reply',
      data: { messageId: 11, inReplyTo: [3], scope: 'message', text: 'reply-C', data: { exitCode: 0 } },
    },
  ]);
  const reply = await berth.waitForReply('r1', posted(3));
  assert.deepEqual(reply, {
    text: 'reply-C',
    data: { exitCode: 0 },
    messageId: 11,
    inReplyTo: [3],
    scope: 'message',
  });
});

test("waitForReply: a message that failed for good throws with the failure's own code, so its hint does not promise a retry", async (t) => {
  const berth = await eventServer(t, [
    { type: 'failed', data: { messageId: 2, tries: 1, code: 'SANDBOX_PIDS_LIMIT', error: 'fork bomb' } },
  ]);
  await assert.rejects(
    berth.waitForReply('r1', posted(2)),
    (err: unknown) =>
      isBerthError(err, 'SANDBOX_PIDS_LIMIT') && /failed after 1 try: fork bomb/.test(err.message),
  );
});

test('agents.apply checks the spec before sending: every wrong field in one INVALID_INPUT, no request made', async () => {
  // Nothing listens on port 9 here: a request would be HOST_UNREACHABLE.
  const berth = new Berth({ url: 'http://127.0.0.1:9' });
  await assert.rejects(
    berth.agents.apply({ name: 'a', provider: 'command', memoryMb: 1, egress: ['nope'] }),
    (err: unknown) =>
      isBerthError(err, 'INVALID_INPUT') &&
      /memoryMb: .*; egress\[0\]: /.test(err.message) &&
      /use at least 16/.test(err.hint),
  );
  await assert.rejects(berth.agents.apply({ name: 'a', provider: 'command' }), (err: unknown) =>
    isBerthError(err, 'HOST_UNREACHABLE'),
  );
});

test('waitForReply: a stream that breaks (its API process died behind a balancer) is followed again from the last event seen', async (t) => {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(new URL(req.url ?? '/', 'http://x').searchParams.get('after') ?? '');
    if (asked.length === 2) {
      // What a balancer answers while it has no healthy host.
      res.writeHead(503, { 'content-type': 'text/html' }).end('<html>No server is available</html>');
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (asked.length === 1) {
      res.write(`id: 5\nevent: started\ndata: ${JSON.stringify({ turnId: 't', attempt: 1 })}\n\n`);
      // The process dies: the connection breaks mid-stream.
      setTimeout(() => res.socket?.destroy(), 50);
      return;
    }
    res.end(
      `id: 6\nevent: reply\ndata: ${JSON.stringify({ messageId: 9, inReplyTo: [2], scope: 'message', text: 'ok', data: {} })}\n\n`,
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const berth = new Berth({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  const reply = await berth.waitForReply('r1', posted(2));
  assert.equal(reply.text, 'ok');
  assert.deepEqual(asked, ['1', '5', '5'], 'from the post, then from the last event seen, twice');
});

test('listings follow `next` page after page, keeping their query', async (t) => {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url!);
    const url = new URL(req.url!, 'http://x');
    const from = Number(url.searchParams.get('after') ?? 0);
    const field = url.pathname === '/v1/sessions' ? 'sessions' : 'agents';
    const items = [1, 2, 3, 4, 5].filter((n) => n > from).slice(0, 2);
    const next = from + 2 < 5 ? String(from + 2) : null;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ [field]: items, next }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const berth = new Berth({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  assert.deepEqual(await berth.agents.list(), [1, 2, 3, 4, 5]);
  assert.deepEqual(asked, ['/v1/agents', '/v1/agents?after=2', '/v1/agents?after=4']);
  asked.length = 0;
  assert.deepEqual(await berth.sessions.list({ status: 'queued' }), [1, 2, 3, 4, 5]);
  assert.deepEqual(asked, [
    '/v1/sessions?status=queued',
    '/v1/sessions?status=queued&after=2',
    '/v1/sessions?status=queued&after=4',
  ]);
});

test('exec: SANDBOX_UNREACHABLE (nothing ran) is sent again until the worker answers; NO_LIVE_SANDBOX is not', async (t) => {
  const asked: string[] = [];
  const server = createServer((req, res) => {
    asked.push(req.url ?? '');
    const refuse = (status: number, code: string) =>
      res
        .writeHead(status, { 'content-type': 'application/json' })
        .end(JSON.stringify({ error: { code, message: `refused: ${code}`, hint: '' } }));
    if (req.url?.includes('/idle/')) return refuse(409, 'NO_LIVE_SANDBOX');
    if (asked.length === 1) return refuse(503, 'SANDBOX_UNREACHABLE');
    res.writeHead(200, { 'content-type': 'application/x-ndjson' });
    res.end('{"type":"stdout","data":"hi\\n"}\n{"type":"exit","exitCode":0}\n');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => server.close());
  const berth = new Berth({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` });
  const lines = [];
  for await (const line of berth.sessions.exec('r1', { command: 'echo hi' })) lines.push(line);
  assert.deepEqual(lines, [
    { type: 'stdout', data: 'hi\n' },
    { type: 'exit', exitCode: 0 },
  ]);
  assert.equal(asked.length, 2);
  await assert.rejects(
    async () => {
      for await (const _ of berth.sessions.exec('idle', { command: 'true' }));
    },
    (err: unknown) => isBerthError(err) && err.code === 'NO_LIVE_SANDBOX',
  );
  assert.equal(asked.length, 3, 'no live sandbox: asked once');
});
