/**
 * The CLI as a user runs it: `berth up` in the background (on SQLite, and on PostgreSQL
 * with --store), then agent create, send --wait, status, against a real sandbox; and
 * `berth up` without an engine or without its database.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { listMounts } from '../src/workspace/index.js';
import { freshDatabase } from './helpers/postgres.js';
import { berth, exited, freePort, spawnBerth, waitForHealthy } from './helpers/processes.js';

const run = promisify(execFile);

for (const kind of ['sqlite', 'postgres'] as const)
  test(`${kind}: berth up, agent create, send --wait, status: messages through a real sandbox`, async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'berth-e2e-'));
    const port = await freePort();
    // A long idle timeout: the status table below shows the session still bound, however slow the machine.
    const env = { ...process.env, BERTH_DATA: dataDir, BERTH_PORT: String(port), BERTH_IDLE_TIMEOUT: '10m' };
    const storeFlag = kind === 'postgres' ? ['--store', await freshDatabase()] : [];
    const up = spawnBerth(['up', ...storeFlag], env, dataDir, 'up.log');
    t.after(async () => {
      if (up.exitCode === null) up.kill('SIGKILL');
      await rm(dataDir, { recursive: true, force: true });
    });
    await waitForHealthy(`http://127.0.0.1:${port}`, up, join(dataDir, 'up.log'));

    const created = await berth(['agent', 'create', 'sh', '--provider', 'command'], env);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /agent sh created/);

    const sent = await berth(['send', 's1', 'echo hello; id -u', '--agent', 'sh', '--wait'], env);
    assert.equal(sent.code, 0, sent.stderr);
    assert.equal(sent.stdout, 'hello\n1000\n');

    const again = await berth(['send', 's1', 'echo more >> f; cat f', '--wait'], env);
    assert.equal(again.code, 0, again.stderr);
    const third = await berth(['send', 's1', 'echo more >> f; cat f', '--wait'], env);
    assert.equal(third.stdout, 'more\nmore\n', 'the workspace carries over between turns');

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

    // A job that leaves a process holding its output ends with its shell, and says so.
    const background = await berth(['send', 's1', 'sleep 1000 & echo started', '--wait'], env);
    assert.equal(background.code, 0, background.stderr);
    assert.equal(background.stdout, 'started\n');
    assert.match(
      background.stderr,
      /^berth: the job left 1 process\(es\) running \(killed when the turn ended\): \d+ sleep 1000\n$/,
    );

    const bad = await berth(['send', 's2', 'x', '--agent', 'ghost'], env);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^berth: Agent ghost does not exist.*Fix: .*berth agent create/);

    up.kill('SIGTERM');
    const code = await exited(up);
    assert.equal(code, 0, 'graceful shutdown');
    const ps = await berth(['status'], env);
    assert.notEqual(ps.code, 0, 'host is gone');
    assert.match(ps.stderr, /No berth host answers/);
  });

test('berth up --store naming a database that does not answer: one line naming it (no password) and the fix, exit non-zero', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-e2e-'));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const url = `postgres://berth:hunter2@127.0.0.1:${await freePort()}/berth`;
  const r = await berth(['up', '--store', url], { ...process.env, BERTH_DATA: dataDir, BERTH_PORT: '0' });
  assert.notEqual(r.code, 0);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(
    lines[0]!,
    /^berth: Cannot open the PostgreSQL store at postgres:\/\/berth:\*\*\*@127\.0\.0\.1:\d+\/berth: .*Fix: /,
  );
  assert.ok(!r.stderr.includes('hunter2'));
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

test('berth up where overlayfs cannot work (data dir on an overlay): one line naming overlayfs, exit non-zero, no mount left', async (t) => {
  const base = await mkdtemp(join(tmpdir(), 'berth-e2e-'));
  const merged = join(base, 'merged');
  for (const d of ['lower', 'upper', 'work', 'merged']) await mkdir(join(base, d));
  await run('mount', [
    '-t',
    'overlay',
    'overlay',
    '-o',
    `lowerdir=${base}/lower,upperdir=${base}/upper,workdir=${base}/work`,
    merged,
  ]);
  t.after(async () => {
    await run('umount', ['-R', merged]);
    await rm(base, { recursive: true, force: true });
  });
  const dataDir = join(merged, 'data');
  const r = await berth(['up'], { ...process.env, BERTH_DATA: dataDir, BERTH_PORT: '0' });
  assert.notEqual(r.code, 0);
  const lines = r.stderr.trim().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0]!, /Cannot mount overlayfs under .*Fix: .*overlay/);
  assert.deepEqual(
    (await listMounts()).filter((m) => m.mountPoint.startsWith(dataDir)),
    [],
  );
});
