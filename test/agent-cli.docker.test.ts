/**
 * Agents configured from the CLI as a user does it, against `berth up` in a child process:
 * every field round-trips through flags, `agent show` files (YAML and JSON), `agent apply`,
 * the API and the SDK; a bad file names each wrong field; a mount off the allowlist gets
 * the API's own error; an agent created with --isolation runsc runs its job under gVisor;
 * an egress rule set with --egress / --egress-header lets its target through (with the
 * header, its value from a host secret) and refuses another, seen from inside the sandbox.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { parse } from 'yaml';
import { Berth } from '../src/client/index.js';
import { isBerthError } from '../src/core/index.js';
import { readAdminToken } from '../src/secrets/index.js';
import { fieldCases } from './helpers/agent-field-cases.js';
import { agentImageMissing } from './helpers/harness-image.js';
import { berth, exited, freePort, spawnBerth, waitForHealthy } from './helpers/processes.js';
import { availableTiers } from './helpers/tiers.js';
import { proxyJob } from './security/probes.js';

/**
 * `berth up` (with `upArgs`) on a temp data dir whose mount allowlist is rooted at
 * `<dataDir>/allowed`; `beforeUp` runs host-side commands first (secrets).
 */
async function runHost(
  t: TestContext,
  upArgs: string[] = [],
  beforeUp?: (env: NodeJS.ProcessEnv) => Promise<void>,
) {
  const dataDir = await mkdtemp(join(tmpdir(), 'berth-agent-cli-'));
  const root = join(dataDir, 'allowed');
  for (const dir of ['data', 'models', 'cfg']) await mkdir(join(root, dir), { recursive: true });
  const allowlist = join(dataDir, 'mount-allowlist.json');
  await writeFile(allowlist, JSON.stringify({ allowedRoots: [{ path: root, description: 'test' }] }));
  const port = await freePort();
  const env = {
    ...process.env,
    BERTH_DATA: dataDir,
    BERTH_PORT: String(port),
    BERTH_MOUNT_ALLOWLIST: allowlist,
  };
  await beforeUp?.(env);
  const up = spawnBerth(['up', ...upArgs], env, dataDir, 'up.log');
  t.after(async () => {
    // SIGTERM: a graceful stop unmounts the slot root (a SIGKILLed host leaves it mounted).
    if (up.exitCode === null) up.kill('SIGTERM');
    await exited(up);
    await rm(dataDir, { recursive: true, force: true });
  });
  const url = `http://127.0.0.1:${port}`;
  await waitForHealthy(url, up, join(dataDir, 'up.log'));
  const sdk = new Berth({ url, token: (await readAdminToken(dataDir)) ?? undefined });
  const cli = async (...args: string[]) => {
    const r = await berth(args, env);
    assert.equal(r.code, 0, `berth ${args.join(' ')}: ${r.stderr}`);
    return r.stdout;
  };
  return { dataDir, root, env, sdk, cli };
}

test('every agent field round-trips through flags, show, apply (YAML and JSON), the API and the SDK', async (t) => {
  const { root, dataDir, sdk, cli } = await runHost(t, ['--slots', '0']);
  for (const [i, c] of fieldCases(root).entries()) {
    const missing = c.image && (await agentImageMissing(c.image));
    if (missing) {
      t.diagnostic(`${c.field}: flags only (agent-flags.test.ts): the API needs an image, and ${missing}`);
      continue;
    }
    const name = `f${i}`;
    const argv = c.argv.includes('--provider') ? c.argv : ['--provider', 'command', ...c.argv];
    await cli('agent', 'create', name, ...argv);
    const yaml = await cli('agent', 'show', name);
    const shown = parse(yaml) as Record<string, unknown>;
    for (const [key, value] of Object.entries(c.expect))
      assert.deepEqual(shown[key], value, `${c.field}: ${key}`);
    assert.deepEqual(shown, await sdk.agents.show(name), `${c.field}: the SDK shows the file the CLI shows`);
    const file = join(dataDir, `${name}.yaml`);
    await writeFile(file, yaml);
    assert.equal(await cli('agent', 'apply', '-f', file), `agent ${name} unchanged\n`, c.field);
    const again = await sdk.agents.apply(shown as never);
    assert.deepEqual([again.created, again.changes], [false, []], c.field);
    // The same fields from a file (through the SDK: the CLI's apply is the call above) to a new agent.
    const fromFile = { ...shown, name: `${name}-file` };
    assert.equal((await sdk.agents.apply(fromFile as never)).created, true);
    assert.deepEqual(await sdk.agents.show(`${name}-file`), fromFile, c.field);
  }

  // JSON: what show -o json prints, apply takes back unchanged.
  await cli(
    'agent',
    'create',
    'j',
    '--provider',
    'command',
    '--resident',
    '--recycle-max-age',
    '60000',
    '--egress',
    'a.example:443',
  );
  const json = join(dataDir, 'j.json');
  await writeFile(json, await cli('agent', 'show', 'j', '-o', 'json'));
  assert.deepEqual(JSON.parse(await readFile(json, 'utf8')), await sdk.agents.show('j'));
  assert.equal(await cli('agent', 'apply', '-f', json), 'agent j unchanged\n');

  // A change through a file: each changed field on its own line.
  const spec = await sdk.agents.show('f1');
  await writeFile(
    join(dataDir, 'change.yaml'),
    JSON.stringify({ ...spec, memoryMb: 64, egress: ['a.example:443'] }),
  );
  assert.equal(
    await cli('agent', 'apply', '-f', join(dataDir, 'change.yaml')),
    'agent f1 updated:\n  memoryMb: 512 -> 64\n  egress: [] -> ["a.example:443"]\n',
  );
  assert.equal(
    await cli('agent', 'update', 'f1', '--memory', '128'),
    'agent f1 updated:\n  memoryMb: 64 -> 128\n',
  );
});

test('a bad agent file: one line per wrong field with its path and fix, nothing applied; a mount off the allowlist gets the API error', async (t) => {
  const { dataDir, env, sdk } = await runHost(t, ['--slots', '0']);
  const file = join(dataDir, 'bad.yaml');
  await writeFile(
    file,
    [
      'name: bad',
      'provider: command',
      'isolation: kata',
      'memoryMb: 8',
      'egress:',
      '  - 127.0.0.1:9000',
      '  - example.com',
      'recycle: {maxAgeMs: 10}',
      'memoryMB: 4',
      '',
    ].join('\n'),
  );
  const r = await berth(['agent', 'apply', '-f', file], env);
  assert.equal(r.code, 2);
  const paths = r.stderr
    .trim()
    .split('\n')
    .map((line) => new RegExp(`^berth: ${file}: ([^:]+): .*\\. Fix: .+$`).exec(line)?.[1]);
  assert.deepEqual(paths, ['isolation', 'memoryMb', 'egress[1]', 'recycle.maxAgeMs', 'memoryMB']);
  await assert.rejects(sdk.agents.get('bad'), (err: unknown) => isBerthError(err, 'AGENT_NOT_FOUND'));

  const outside = await mkdtemp(join(tmpdir(), 'berth-not-allowed-'));
  t.after(() => rm(outside, { recursive: true, force: true }));
  const viaCli = await berth(
    ['agent', 'create', 'm', '--provider', 'command', '--mount', `${outside}:x`],
    env,
  );
  assert.equal(viaCli.code, 2);
  const viaApi = await sdk.agents
    .create({ name: 'm', provider: 'command', mounts: [{ hostPath: outside, containerPath: 'x' }] })
    .then(
      () => assert.fail('the API took a mount off the allowlist'),
      (err: unknown) => err,
    );
  assert.ok(isBerthError(viaApi, 'MOUNT_NOT_ALLOWED'));
  assert.equal(viaCli.stderr, `berth: ${viaApi.message}. Fix: ${viaApi.hint}\n`);
});

const tiers = await availableTiers();
const runscSkip = tiers.find((x) => x.tier === 'runsc')!.skip;

test('an agent created with --isolation runsc runs its job under gVisor (a runc one does not)', {
  skip: runscSkip,
}, async (t) => {
  const { cli } = await runHost(t);
  await cli('agent', 'create', 'gv', '--provider', 'command', '--isolation', 'runsc');
  await cli('agent', 'create', 'rc', '--provider', 'command');
  const kernel = 'dmesg 2>&1 | head -1; cat /proc/version';
  const gvisor = await cli('send', 'g1', kernel, '--agent', 'gv', '--wait');
  assert.match(gvisor, /Starting gVisor/);
  const runc = await cli('send', 'r1', kernel, '--agent', 'rc', '--wait');
  assert.doesNotMatch(runc, /gVisor/);
  assert.equal((await readFile('/proc/version', 'utf8')).trim(), runc.trim().split('\n').at(-1));
});

test('an egress rule set from the CLI lets its target through with its header and refuses another', async (t) => {
  const seen: { target: string; header: string | undefined }[] = [];
  const listen = async (target: string) => {
    const server = createServer((req, res) => {
      seen.push({ target, header: req.headers['x-berth-test'] as string | undefined });
      res.end(`hello from ${target}`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    t.after(() => server.close());
    return `127.0.0.1:${(server.address() as AddressInfo).port}`;
  };
  const allowed = await listen('allowed');
  const other = await listen('other');
  const { cli } = await runHost(t, [], async (env) => {
    const set = await berth(['secret', 'set', 'egress-test', 'swordfish'], env);
    assert.equal(set.code, 0, set.stderr);
  });
  await cli(
    'agent',
    'create',
    'net',
    '--provider',
    'command',
    '--egress',
    allowed,
    '--egress-header',
    `${allowed}=X-Berth-Test: key {{secret:egress-test}}`,
  );
  const out = JSON.parse(
    await cli(
      'send',
      'e1',
      proxyJob([`http://${allowed}/x`, `http://${other}/x`], []),
      '--agent',
      'net',
      '--wait',
    ),
  );
  assert.equal(out[`GET http://${allowed}/x`], '200 hello from allowed');
  assert.match(out[`GET http://${other}/x`], /^403 .*EGRESS_DENIED/);
  assert.deepEqual(
    seen,
    [{ target: 'allowed', header: 'key swordfish' }],
    'the other target is never reached',
  );
});

/** The job's file-size limit (RLIMIT_FSIZE = the agent's workspaceMb, in 512-byte blocks) and its sandbox's hostname. */
const LIMIT_JOB = 'echo "$(ulimit -f) $(hostname)"';

test('a change reaches a session with its next sandbox: runc keeps the old config while its sandbox serves on, gVisor takes it at the next turn', async (t) => {
  const { cli } = await runHost(t, [], async (env) => {
    env.BERTH_IDLE_TIMEOUT = '10m';
  });
  const ask = async (session: string, agent: string) =>
    (await cli('send', session, LIMIT_JOB, '--agent', agent, '--wait')).trim().split(' ') as [string, string];
  const blocks = (mb: number) => String((mb * 2 ** 20) / 512);

  await cli('agent', 'create', 'rc', '--provider', 'command', '--workspace-mb', '64');
  const [before, sandbox] = await ask('r1', 'rc');
  assert.equal(before, blocks(64));
  await cli('agent', 'update', 'rc', '--workspace-mb', '32');
  assert.deepEqual(
    await ask('r1', 'rc'),
    [blocks(64), sandbox],
    'the same sandbox serves on with the old config',
  );
  assert.equal((await ask('r2', 'rc'))[0], blocks(32), 'a new sandbox (another session) has the new one');

  if (runscSkip) return t.diagnostic(`gVisor half skipped: ${runscSkip}`);
  await cli('agent', 'create', 'gv', '--provider', 'command', '--isolation', 'runsc', '--workspace-mb', '64');
  const [gBefore, gSandbox] = await ask('g1', 'gv');
  assert.equal(gBefore, blocks(64));
  await cli('agent', 'update', 'gv', '--workspace-mb', '32');
  const [gAfter, gNext] = await ask('g1', 'gv');
  assert.equal(gAfter, blocks(32), 'a fresh sandbox per turn: the next turn has the new config');
  assert.notEqual(gNext, gSandbox);
});
