/**
 * Limits that hold: a fork bomb, a memory bomb, a /tmp filler, a
 * workspace filler (one big file, and many small ones) and an endless writer, each run as
 * a real job in a real sandbox. Each is contained to its own sandbox, fails its turn at
 * once with its catalogue code (no retry: it would hit the limit again), commits nothing,
 * and leaves the worker serving other sessions. The fork bomb and the memory bomb run
 * again while another session's turn is in flight beside them (held open on a test server
 * it reaches through its egress allowlist): that turn commits, on its first try.
 */
import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import { createServer, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import type { ErrorCode } from '../src/core/index.js';
import { startTestHost, waitPromoted } from './helpers/test-host.js';
import { availableTiers, type Tier } from './helpers/tiers.js';

/** Agents: `bounded` for most cases; `smallDisk` has a 32 MiB workspace quota (and so a 32 MiB largest file). */
interface Expected {
  code: ErrorCode;
  /** What the message says beside the code (the code is the contract; this checks the detail is carried). */
  message?: RegExp;
}
const CASES: { name: string; job: string; expect: Expected; agent?: 'smallDisk'; runsc?: Expected }[] = [
  {
    name: 'fork bomb',
    job: 'bomb() { bomb | bomb & }; bomb; sleep 5',
    expect: { code: 'SANDBOX_PIDS_LIMIT' },
    // gVisor: the bomb takes its own sandbox down (docs/isolation.md); a crash, so retried like one.
    runsc: { code: 'SANDBOX_EXITED', message: /\(exit code 2\)$/ },
  },
  { name: 'memory bomb', job: 'head -c 2000m /dev/zero | tail', expect: { code: 'SANDBOX_OUT_OF_MEMORY' } },
  {
    name: '/tmp filler',
    job: 'dd if=/dev/zero of=/tmp/fill bs=1M count=500; true',
    expect: { code: 'SANDBOX_TMP_FULL', message: /^\/tmp \(64 MiB\) is full/ },
  },
  {
    name: '/dev/shm filler',
    job: 'dd if=/dev/zero of=/dev/shm/fill bs=1M count=500; true',
    expect: { code: 'SANDBOX_TMP_FULL', message: /^\/dev\/shm \(64 MiB\) is full/ },
  },
  {
    name: 'workspace filler, one file',
    job: 'dd if=/dev/zero of=fill bs=1M count=500; true',
    expect: { code: 'WORKSPACE_QUOTA_EXCEEDED', message: / over its 32\.0 MiB quota/ },
    agent: 'smallDisk',
  },
  {
    name: 'workspace filler, many files',
    job: 'for i in $(seq 1 200); do head -c 1048576 /dev/zero > f$i; done; sleep 2',
    expect: { code: 'WORKSPACE_QUOTA_EXCEEDED' },
    agent: 'smallDisk',
  },
  {
    name: 'endless output',
    job: 'yes',
    expect: { code: 'OUTPUT_LIMIT_EXCEEDED', message: /^a job wrote more than 65536 bytes to stdout/ },
  },
];

for (const { tier, skip } of await availableTiers()) {
  test(
    `limits (${tier}): each is contained to its sandbox with its catalogue code; the worker stays healthy`,
    { skip },
    (t) => limits(t, tier),
  );
}

async function limits(t: TestContext, tier: Tier): Promise<void> {
  // Two tries, quickly: a limit is terminal (one try); a crash (gVisor's fork bomb) is retried once.
  const { host, client, dataDir, sendAndCollect } = await startTestHost(t, {
    BERTH_MAX_TRIES: '2',
    BERTH_RETRY_BASE: '100ms',
  });
  await client.request('POST', '/v1/agents', {
    name: 'bounded',
    provider: 'command',
    memoryMb: 192,
    pidsLimit: 64,
    isolation: tier,
  });
  await client.request('POST', '/v1/agents', {
    name: 'smallDisk',
    provider: 'command',
    workspaceMb: 32,
    isolation: tier,
  });
  const released = async (session: string) => {
    for (let i = 0; i < 200; i++) {
      const view = await host.store.getSessionView(session, Date.now());
      if (view && view.leaseOwner === null) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`session ${session} was not released`);
  };
  for (const [i, c] of CASES.entries()) {
    await t.test(c.name, async () => {
      const session = `limit${i}`;
      const events = await sendAndCollect(
        session,
        { agent: c.agent ?? 'bounded', text: c.job },
        (e) => e.type === 'failed' || e.type === 'reply',
        90_000,
      );
      const last = events.at(-1)!;
      assert.equal(last.type, 'failed', JSON.stringify(events));
      const expected = (tier === 'runsc' && c.runsc) || c.expect;
      assert.equal(last.data.code, expected.code, JSON.stringify(last.data));
      if (expected.message) assert.match(String(last.data.error), expected.message);
      if (expected === c.expect) {
        assert.equal(last.data.tries, 1, 'a limit is terminal: not retried');
        assert.equal(events.filter((e) => e.type === 'retrying').length, 0);
      }
      await released(session);
      const view = (await host.store.getSessionView(session, Date.now()))!;
      assert.deepEqual(
        [view.workspaceVersion, view.lastReply],
        [0, null],
        'nothing of the turn was committed',
      );
      assert.ok(
        (await host.store.listTurns(session)).every((turn) => turn.status === 'aborted'),
        'every try was aborted',
      );
      assert.deepEqual(
        await readdir(join(dataDir, 'workspaces', session, 'committed')),
        [],
        'the committed files are untouched',
      );
      assert.deepEqual(await readdir(join(dataDir, 'workspaces', session, 'layers')), [], 'layer discarded');
    });
  }
  const gate = await heldGate(t);
  await client.request('POST', '/v1/agents', {
    name: 'beside',
    provider: 'command',
    isolation: tier,
    egress: [`127.0.0.1:${gate.port}`],
  });
  for (const [i, c] of CASES.filter((x) => x.name === 'fork bomb' || x.name === 'memory bomb').entries()) {
    await t.test(
      `a ${c.name} beside another session's running turn: that turn commits, untouched`,
      async () => {
        const neighbour = `beside${i}`;
        const arrived = gate.next();
        const replied = sendAndCollect(
          neighbour,
          { agent: 'beside', text: waitAtGate(gate.port) },
          (e) => e.type === 'failed' || e.type === 'reply',
          180_000,
        );
        // The neighbour's turn is in flight, held at the gate, before the bomb is sent.
        await Promise.race([
          arrived,
          replied.then((events) => {
            throw new Error(`the neighbour ended before it reached the gate: ${JSON.stringify(events)}`);
          }),
        ]);
        const bombed = await sendAndCollect(
          `bomb-beside${i}`,
          { agent: 'bounded', text: c.job },
          (e) => e.type === 'failed' || e.type === 'reply',
          90_000,
        );
        const expected = (tier === 'runsc' && c.runsc) || c.expect;
        assert.equal(bombed.at(-1)!.data.code, expected.code, JSON.stringify(bombed.at(-1)));
        gate.open('beside the bomb');
        const events = await replied;
        assert.equal(events.at(-1)!.type, 'reply', JSON.stringify(events));
        assert.equal(events.at(-1)!.data.text, '200 beside the bomb\n');
        const turns = await host.store.listTurns(neighbour);
        assert.deepEqual(
          turns.map((turn) => [turn.status, turn.attempt]),
          [['committed', 1]],
          'one try, committed: the bomb never reached it',
        );
        await waitPromoted(host, neighbour);
        assert.equal(
          await readFile(join(dataDir, 'workspaces', neighbour, 'committed', 'beside.txt'), 'utf8'),
          'beside the bomb',
        );
      },
    );
  }
  await t.test('the worker is healthy afterwards: the next session gets its reply', async () => {
    const events = await sendAndCollect('after', { agent: 'bounded', text: 'echo still here' }, (e) =>
      ['reply', 'failed'].includes(e.type),
    );
    assert.equal(events.at(-1)?.data.text, 'still here\n');
    const status = await client.request<{ workers: { alive: boolean }[]; sandboxes: unknown[] }>(
      'GET',
      '/v1/status',
    );
    assert.ok(status.workers.every((w) => w.alive));
    // The engine may still be finishing the removal of the bomb's sandbox: wait for it to go, bounded.
    // Named by the turns that ran in them: a pooled sandbox carries no session label.
    const names = (await host.store.listTurns('limit0')).map((turn) => turn.sandbox);
    assert.ok(names.length > 0 && names.every((n) => n !== null), JSON.stringify(names));
    const bombSandboxes = async () =>
      (
        await host.docker.listContainers({
          all: true,
          filters: { label: [`berth.install=${host.worker.installId}`] },
        })
      ).filter((c) => c.Names.some((n) => names.includes(n.replace(/^\//, ''))));
    for (let i = 0; i < 100 && (await bombSandboxes()).length > 0; i++)
      await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(await bombSandboxes(), [], 'the fork bomb sandbox is gone');
  });
}

/**
 * A test server that holds every request until `open`: a job waiting on it is a turn kept
 * in flight for as long as the test needs. `next` resolves when the next request arrives.
 */
async function heldGate(t: TestContext) {
  let held: ServerResponse[] = [];
  let arrive = () => {};
  const server = createServer((_req, res) => {
    held.push(res);
    arrive();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.after(() => {
    for (const res of held) res.end();
    server.close();
  });
  return {
    port: (server.address() as { port: number }).port,
    next: () =>
      new Promise<void>((r) => {
        arrive = r;
      }),
    open(text: string) {
      for (const res of held) res.end(text);
      held = [];
    },
  };
}

/** A job that asks the gate through the sandbox's egress proxy, writes what it answered to beside.txt and prints it. */
function waitAtGate(port: number): string {
  const script = [
    "const http = require('http');",
    `http.get({ host: '127.0.0.1', port: 3128, path: 'http://127.0.0.1:${port}/wait' }, (res) => {`,
    "  let text = ''; res.on('data', (c) => (text += c));",
    "  res.on('end', () => { require('fs').writeFileSync('beside.txt', text); console.log(res.statusCode, text); });",
    "}).on('error', (e) => { console.log('error', e.message); process.exit(1); });",
  ].join(' ');
  return `node -e "${script}"`;
}
