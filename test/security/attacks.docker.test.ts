/**
 * The attack suite: each case is a job an attacker would run, sent as a
 * `command` message and run inside a real sandbox; the test judges what the job reached.
 * Every case must be refused, and where it touches the gateway, audited. docs/security.md
 * lists the cases and their results.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { networkInterfaces } from 'node:os';
import { join } from 'node:path';
import { type TestContext, test } from 'node:test';
import { startTestHost } from '../helpers/test-host.js';
import { availableTiers, type Tier } from '../helpers/tiers.js';
import { connectJob, gatewayCallJob, SYSCALLS_JOB, secretSearchJob, sessionTokenJob } from './probes.js';

const SOCKET = '/run/berth/gateway.sock';

/** errno of each raw syscall (SYSCALLS_JOB) per tier; 0 = it worked. */
const SYSCALL_ERRNOS: Record<Tier, Record<string, number>> = {
  // ptrace: every job runs under the runner's seccomp filter (src/runner/job-confinement.ts).
  runc: { keyctl: 1, mount: 1, ptrace: 1, ptrace_init: 1, setuid: 1, unshare: 1 },
  // gVisor answers from its own kernel: keyctl EACCES; a user namespace is granted inside it, touching no host kernel state.
  runsc: { keyctl: 13, mount: 1, ptrace: 1, ptrace_init: 1, setuid: 1, unshare: 0 },
};

for (const { tier, skip } of await availableTiers()) {
  test(`attack suite (${tier}): every case run from inside a sandbox is refused`, { skip }, (t) =>
    attackSuite(t, tier),
  );
}

async function attackSuite(t: TestContext, tier: Tier): Promise<void> {
  const lab = await startTestHost(t, { BERTH_IDLE_TIMEOUT: '60s' });
  const { host, client, dataDir } = lab;
  await client.request('POST', '/v1/agents', { name: 'attacker', provider: 'command', isolation: tier });
  /** Runs one job as a message of `session`; returns its stdout (the reply) and exit code. */
  const run = async (session: string, job: string) => {
    const events = await lab.sendAndCollect(session, { agent: 'attacker', text: job }, (e) =>
      ['reply', 'failed'].includes(e.type),
    );
    const last = events.at(-1)!;
    assert.equal(last.type, 'reply', `the job itself ran: ${JSON.stringify(last.data)}`);
    return { stdout: String(last.data.text), data: last.data.data as { exitCode: number; stderr: string } };
  };
  /** The victim's session token, as a job inside the victim would get it (boot token → GET /v1/bind). */
  const victimToken = async () => {
    for (let i = 0; i < 400; i++) {
      const sandbox = (await host.store.getSessionView('victim', Date.now()))?.sandbox;
      const runDir = sandbox ? join(dataDir, 'run', sandbox) : '';
      const boot = runDir ? await readFile(join(runDir, 'token'), 'utf8').catch(() => '') : '';
      const token = boot ? await bindToken(join(runDir, 'gateway.sock'), boot.trim()).catch(() => '') : '';
      if (token) return token;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('the victim sandbox was never bound');
  };
  const released = async (session: string) => {
    for (let i = 0; i < 200; i++) {
      if ((await host.store.getSessionView(session, Date.now()))?.leaseOwner === null) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`session ${session} was not released`);
  };

  await t.test(
    'network: only loopback; host addresses, the Docker bridge and 169.254.169.254 are unreachable',
    async () => {
      let connections = 0;
      const server = createServer((s) => {
        connections++;
        s.destroy();
      });
      await new Promise<void>((r) => server.listen(0, '0.0.0.0', r));
      t.after(() => server.close());
      const port = (server.address() as { port: number }).port;
      const hostAddresses = Object.values(networkInterfaces())
        .flat()
        .filter((a) => a && a.family === 'IPv4' && !a.internal)
        .map((a) => a!.address);
      assert.ok(hostAddresses.length > 0);
      const targets: [string, number][] = [
        ...hostAddresses.map((a): [string, number] => [a, port]),
        ['172.17.0.1', port],
        ['127.0.0.1', port],
        ['169.254.169.254', 80],
      ];
      const { stdout } = await run('net', `tail -n +3 /proc/net/dev | cut -d: -f1; ${connectJob(targets)}`);
      const [interfaces, json] = splitLast(stdout);
      assert.deepEqual(interfaces!.trim().split(/\s+/), ['lo'], 'no interface but loopback');
      const reached = JSON.parse(json!) as Record<string, string>;
      for (const [target, result] of Object.entries(reached)) assert.notEqual(result, 'CONNECTED', target);
      assert.equal(reached[`127.0.0.1:${port}`], 'ECONNREFUSED', "the sandbox's loopback is its own");
      assert.equal(reached['169.254.169.254:80'], tier === 'runc' ? 'ENETUNREACH' : 'EHOSTUNREACH');
      assert.equal(connections, 0, 'the host server saw no connection');
    },
  );

  await t.test('sockets: no Docker socket; the only socket is its own gateway', async () => {
    const job = [
      'for s in /var/run/docker.sock /run/docker.sock /run/containerd/containerd.sock; do [ -e $s ] && echo "FOUND $s"; done',
      'find / \\( -path /proc -o -path /sys \\) -prune -o -type s -print 2>/dev/null',
    ].join('; ');
    const { stdout } = await run('sockets', job);
    assert.equal(stdout.trim(), SOCKET);
  });

  await t.test(
    "another session's token, leaked into this sandbox, is refused (401) and audited",
    async () => {
      // The victim's sandbox is mid-turn (on every tier), so its token is current.
      const posted = await client.request<{ eventId: number }>('POST', '/v1/sessions/victim/messages', {
        agent: 'attacker',
        text: 'sleep 20',
      });
      assert.ok(posted.eventId > 0);
      const token = await victimToken();
      const { stdout } = await run('thief', gatewayCallJob(SOCKET, token, 'POST', '/v1/heartbeat'));
      assert.deepEqual(JSON.parse(stdout), { status: 401, code: 'UNAUTHORIZED' });
      const audit = await host.store.listAudit(0, 1000);
      assert.ok(
        audit.some(
          (a) =>
            a.kind === 'unauthorized' &&
            a.sessionId === 'thief' &&
            (a.data as { tokenSession: string }).tokenSession === 'victim',
        ),
        JSON.stringify(audit),
      );
    },
  );

  await t.test('a token of an old generation is refused (409) and audited', async () => {
    const { stdout: oldToken } = await run('replaced', sessionTokenJob(SOCKET));
    const first = (await host.store.getSessionView('replaced', Date.now()))!;
    // Gone already on runsc (a fresh sandbox per turn); killed here on runc.
    await host.docker
      .getContainer(first.sandbox!)
      .kill()
      .catch(() => undefined);
    await released('replaced');
    const { stdout } = await run(
      'replaced',
      gatewayCallJob(SOCKET, oldToken.trim(), 'POST', '/v1/heartbeat'),
    );
    assert.deepEqual(JSON.parse(stdout), { status: 409, code: 'STALE_GENERATION' });
    const now = (await host.store.getSessionView('replaced', Date.now()))!;
    assert.ok(now.generation > first.generation);
    const audit = await host.store.listAudit(0, 1000);
    assert.ok(
      audit.some(
        (a) =>
          a.kind === 'stale-generation' && a.sessionId === 'replaced' && a.generation === first.generation,
      ),
    );
  });

  await t.test(
    'host secrets: in no file, environment or process environment the sandbox can read',
    async () => {
      const marker = `berth-host-secret-${randomBytes(8).toString('hex')}`;
      await writeFile(join(dataDir, 'host-secret.txt'), marker);
      process.env.BERTH_TEST_HOST_SECRET = marker;
      t.after(() => delete process.env.BERTH_TEST_HOST_SECRET);
      const { stdout } = await run(
        'secrets',
        `${secretSearchJob(marker)}; cat /etc/shadow >/dev/null 2>&1; echo "shadow:$?"`,
      );
      assert.equal(
        stdout,
        'files:none\n0\nshadow:1\n',
        'no file has it, no environment has it, shadow unreadable',
      );
    },
  );

  await t.test(
    'writes outside the workspace fail; /workspace and the scratch tmpfs (/tmp, /dev/shm) take them',
    async () => {
      const dirs = [
        '/',
        '/etc',
        '/usr/bin',
        '/opt/berth',
        '/run/berth',
        '/var/tmp',
        '/root',
        '/dev',
        '/sys/fs/cgroup',
      ];
      const job = `for d in ${dirs.join(' ')}; do touch $d/berth-probe 2>/dev/null && echo "WROTE $d"; done; touch /workspace/ok /tmp/ok /dev/shm/ok && echo fine`;
      const { stdout } = await run('writes', job);
      assert.equal(stdout, 'fine\n');
    },
  );

  await t.test(
    'mount, keyctl, setuid(0) and ptrace (of the runner or the init) are refused (errnos per tier)',
    async () => {
      const { stdout } = await run('syscalls', `${SYSCALLS_JOB}; ps -eo user= | sort -u`);
      const [json, ...users] = stdout.trim().split('\n');
      assert.deepEqual(JSON.parse(json!), SYSCALL_ERRNOS[tier]);
      assert.deepEqual(
        users,
        ['berth'],
        'every visible process is the sandbox user: nothing outside to attach to',
      );
    },
  );

  await t.test(
    'the image holds no setuid or setgid file, and passwd (setuid root in Debian) runs without privilege (no-new-privileges)',
    async () => {
      const job = [
        'find / -xdev -perm /6000 -type f 2>/dev/null | wc -l',
        // Read its status once it is passwd (the forked shell before the exec is uid 1000 too);
        // it then waits on the pipe for 3 s, so it is there to be read. Bounded: 3 s.
        'sleep 3 | passwd >/dev/null 2>&1 & p=$!; i=0',
        'while [ "$(cat /proc/$p/comm 2>/dev/null)" != passwd ] && [ $i -lt 300 ]; do i=$((i+1)); sleep 0.01; done',
        'cat /proc/$p/comm; grep Uid: /proc/$p/status',
        "grep -E '^(NoNewPrivs|CapEff):' /proc/self/status",
      ].join('; ');
      const { stdout } = await run('setuid', job);
      const [count, comm, uid, ...status] = stdout.trim().split('\n');
      assert.equal(Number(count), 0, 'no setuid or setgid file: the build cleared every bit');
      assert.equal(comm, 'passwd', 'the status read is passwd’s own');
      assert.deepEqual(
        uid!.split(/\s+/),
        ['Uid:', '1000', '1000', '1000', '1000'],
        'passwd runs as 1000, not root',
      );
      // gVisor's /proc/<pid>/status has no NoNewPrivs line; the passwd check above is what matters.
      assert.deepEqual(
        status.map((l) => l.split(/\s+/).join(' ')),
        tier === 'runc' ? ['CapEff: 0000000000000000', 'NoNewPrivs: 1'] : ['CapEff: 0000000000000000'],
      );
    },
  );
}

/** The last line apart from what precedes it. */
function splitLast(text: string): [string, string] {
  const lines = text.trim().split('\n');
  return [lines.slice(0, -1).join('\n'), lines.at(-1)!];
}

/** GET /v1/bind on a gateway socket with its boot token: the session token once bound. */
function bindToken(socketPath: string, bootToken: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, path: '/v1/bind', headers: { authorization: `Bearer ${bootToken}` }, timeout: 2000 },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => {
          text += c;
        });
        res.on('end', () =>
          res.statusCode === 200
            ? resolve((JSON.parse(text) as { token: string }).token)
            : reject(new Error(text)),
        );
      },
    );
    req.on('timeout', () => req.destroy(new Error('bind timed out')));
    req.on('error', reject);
    req.end();
  });
}
