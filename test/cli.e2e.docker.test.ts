/**
 * The CLI as a user runs it: `berth up` in the background, then agent create, send
 * --wait, status, against a real sandbox; and `berth up` without an engine.
 */
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/berth.js', import.meta.url));

function berth(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, ...args], { env, timeout: 120_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

async function waitForHealthy(url: string, up: ChildProcess, logFile: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    if (up.exitCode !== null)
      throw new Error(`berth up exited ${up.exitCode}: ${await readFile(logFile, 'utf8')}`);
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error('berth up did not become healthy in 60 s');
}

test('berth up, agent create, send --wait, status: one message through a real sandbox', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-e2e-'));
  const port = await freePort();
  const env = { ...process.env, BERTH_DATA: dataDir, BERTH_PORT: String(port) };
  const logFile = join(dataDir, 'up.log');
  const { openSync } = await import('node:fs');
  const up = spawn(process.execPath, [BIN, 'up'], {
    env,
    stdio: ['ignore', 'ignore', openSync(logFile, 'w')],
  });
  t.after(async () => {
    if (up.exitCode === null) up.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  });
  await waitForHealthy(`http://127.0.0.1:${port}`, up, logFile);

  const created = await berth(['agent', 'create', 'sh', '--provider', 'command'], env);
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /agent sh created/);

  const sent = await berth(['send', 's1', 'echo hello; id -u', '--agent', 'sh', '--wait'], env);
  assert.equal(sent.code, 0, sent.stderr);
  assert.equal(sent.stdout, 'hello\n1000\n');

  const failing = await berth(['send', 's1', 'echo oops >&2; exit 7', '--wait'], env);
  assert.equal(failing.code, 7, 'the job exit code comes through');
  assert.equal(failing.stderr, 'oops\n');

  const status = await berth(['status', '--json'], env);
  const body = JSON.parse(status.stdout);
  assert.equal(body.sessions[0].id, 's1');
  assert.equal(body.sessions[0].lastReply.text, '');
  assert.equal(body.workers.length, 1);
  const table = await berth(['status'], env);
  assert.match(table.stdout, /^SESSION\s+AGENT\s+STATUS/);
  assert.match(table.stdout, /s1\s+sh\s+bound/);

  const bad = await berth(['send', 's2', 'x', '--agent', 'ghost'], env);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /^berth: Agent ghost does not exist.*Fix: .*berth agent create/);

  up.kill('SIGTERM');
  const code = await new Promise((r) => up.on('exit', r));
  assert.equal(code, 0, 'graceful shutdown');
  const ps = await berth(['status'], env);
  assert.notEqual(ps.code, 0, 'host is gone');
  assert.match(ps.stderr, /No berth host answers/);
});

test('berth up with no Docker engine: one line naming the socket and the fix, exit non-zero', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-e2e-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const socket = join(dataDir, 'no-docker.sock');
  const r = await berth(['up'], {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_DOCKER_SOCKET: socket,
    BERTH_PORT: '0',
  });
  assert.notEqual(r.code, 0);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.ok(lines[0]!.includes(socket), lines[0]);
  assert.match(lines[0]!, /Fix: .*dockerd/);
});
