/**
 * The Python SDK (sdk/python) against a real host (real Docker, SQLite, HTTP), run with
 * Debian's python3: its unittest modules, with BERTH_URL and two tenants' tokens in their
 * environment. Their output is the failure message.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { startTestHost } from './helpers/test-host.js';

/** Debian's, which scripts/ensure-python3.sh installs; not a pyenv or venv one first on PATH. */
const PYTHON = '/usr/bin/python3';
const SDK = join(import.meta.dirname, '..', '..', 'sdk', 'python');

test('Python SDK: agents, send and wait, a failed turn, tenants, commands.run, the asyncio client', async (t) => {
  const { host, client } = await startTestHost(t, { BERTH_MAX_TRIES: '1' });
  const token = async (tenant: string) =>
    (await client.request<{ token: string }>('POST', '/v1/tokens', { tenant })).token;
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    PYTHONPATH: SDK,
    PYTHONDONTWRITEBYTECODE: '1',
    BERTH_URL: host.url,
    BERTH_TOKEN: await token('py'),
    BERTH_OTHER_TOKEN: await token('py-other'),
  };
  const run = await promisify(execFile)(
    PYTHON,
    ['-W', 'error::ResourceWarning', '-m', 'unittest', 'discover', '-v', '-s', join(SDK, 'tests')],
    { env, timeout: 120_000 },
  ).then(
    (done) => ({ code: 0, ...done }),
    (err: { code: number | string; stdout: string; stderr: string }) => err,
  );
  assert.equal(
    run.code,
    0,
    `${PYTHON} -m unittest failed (${run.code}; ENOENT: scripts/ensure-python3.sh installs it):\n${run.stdout}\n${run.stderr}`,
  );
  assert.match(run.stderr, /^OK$/m, run.stderr);
});
