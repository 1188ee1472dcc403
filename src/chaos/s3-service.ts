/**
 * A throw-away S3 service for tests, benchmarks and chaos runs: Ceph's radosgw on a
 * one-node Ceph cluster built by hand under a temp dir from Debian's packages
 * (scripts/ensure-ceph.sh), on free loopback ports. One mon (msgr v2 only), one OSD on
 * memstore (in RAM: no disk image, no mount), no mgr (S3 works without one, at about a
 * third of the memory), pool size 1 with 8 PGs, the seven RGW pools made up front, and
 * one S3 user whose keys it hands out.
 *
 * Invariants:
 * - Nothing outside its dir: config, keyrings, data, logs, admin sockets and the mon's
 *   cluster log are all under it; no system service or /etc/ceph file is touched. Keys
 *   go in one keyring line per daemon section, never in [global].
 * - `kill()` SIGKILLs radosgw alone (the S3 daemon dies, the cluster under it stays up):
 *   the fault a chaos run injects. `restart()` starts it again and returns once S3
 *   answers signed requests.
 * - `remove()` leaves nothing behind: every daemon SIGKILLed and reaped, its dir deleted
 *   (memstore: no mount). Idempotent.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sleep } from '../core/index.js';
import { freePort } from './children.js';

const run = promisify(execFile);
const READY_TIMEOUT_MS = 60_000;
const CEPH_TOOLS = ['ceph-mon', 'ceph-osd', 'radosgw', 'radosgw-admin', 'ceph', 'monmaptool'];
/** Default zone's pools: made up front with 8 PGs each, so radosgw need not create them at start. */
const RGW_POOLS = [
  '.rgw.root',
  'default.rgw.control',
  'default.rgw.meta',
  'default.rgw.log',
  'default.rgw.buckets.index',
  'default.rgw.buckets.data',
  'default.rgw.buckets.non-ec',
];
const DAEMONS = ['mon', 'osd', 'rgw'] as const;
type Daemon = (typeof DAEMONS)[number];

export interface S3Service {
  /** http://127.0.0.1:<port> */
  readonly endpoint: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** The cluster's files: config, keyrings, data, logs. */
  readonly dir: string;
  /** How long each step of the bring-up took, in ms, in order (the last: S3 answering). */
  readonly bringUpMs: Readonly<Record<string, number>>;
  /** The variables a berth process reads to reach this service (AWS_ENDPOINT_URL_S3, keys, region). */
  env(): Record<string, string>;
  createBucket(name: string): Promise<void>;
  /** Process ids of the running daemons. */
  pids(): Partial<Record<Daemon, number>>;
  /** Resident memory of each running daemon, in bytes (from /proc). */
  rssBytes(): Promise<Partial<Record<Daemon, number>>>;
  /** SIGKILL of the radosgw process; resolves once it is gone. */
  kill(): Promise<void>;
  /** Starts radosgw again (after a kill: killing it first otherwise) and waits until S3 answers. */
  restart(): Promise<void>;
  /** Every daemon SIGKILLed and reaped, the dir deleted. Idempotent. */
  remove(): Promise<void>;
}

/** Fails with the fix when Ceph's daemons are not installed. */
export async function assertCephInstalled(): Promise<void> {
  const missing: string[] = [];
  for (const tool of CEPH_TOOLS)
    await run('sh', ['-c', `command -v ${tool}`]).catch(() => missing.push(tool));
  if (missing.length > 0)
    throw new Error(
      `Ceph is not installed (${missing.join(', ')} missing); install it: bash scripts/ensure-ceph.sh (apt-get install ceph-mon ceph-osd radosgw ceph-common)`,
    );
}

export async function startS3Service(): Promise<S3Service> {
  await assertCephInstalled();
  const dir = await mkdtemp(join(tmpdir(), 'berth-ceph-'));
  const daemons = new Map<Daemon, ChildProcess>();
  const bringUpMs: Record<string, number> = {};
  let mark = performance.now();
  const step = (name: string) => {
    const now = performance.now();
    bringUpMs[name] = Math.round(now - mark);
    mark = now;
  };
  const killAll = async () => {
    await Promise.all(DAEMONS.map((d) => stopDaemon(daemons, d)));
  };
  try {
    const [monPort, rgwPort] = [await freePort(), await freePort()];
    const conf = join(dir, 'ceph.conf');
    const fsid = randomUUID();
    const osdUuid = randomUUID();
    await Promise.all(['mon', 'osd', 'rgw', 'run', 'log', 'crash'].map((d) => mkdir(join(dir, d))));
    await writeFile(conf, cephConf(dir, fsid, monPort, rgwPort));
    const keys = {
      'mon.': { mon: 'allow *' },
      'client.admin': { mon: 'allow *', osd: 'allow *', mgr: 'allow *' },
      'osd.0': { mon: 'allow profile osd', osd: 'allow *', mgr: 'allow profile osd' },
      'client.rgw': { mon: 'allow rw', osd: 'allow rwx', mgr: 'allow rw' },
    };
    const keyrings = Object.fromEntries(
      Object.entries(keys).map(([name, caps]) => [name, keyringEntry(name, caps)]),
    );
    await writeFile(join(dir, 'mon.keyring'), Object.values(keyrings).join(''), { mode: 0o600 });
    await writeFile(join(dir, 'admin.keyring'), keyrings['client.admin']!, { mode: 0o600 });
    await writeFile(join(dir, 'osd', 'keyring'), keyrings['osd.0']!, { mode: 0o600 });
    await writeFile(join(dir, 'rgw.keyring'), keyrings['client.rgw']!, { mode: 0o600 });
    const c = ['-c', conf];
    await run('monmaptool', [
      '--create',
      '--addv',
      'a',
      `[v2:127.0.0.1:${monPort}]`,
      '--fsid',
      fsid,
      join(dir, 'monmap'),
    ]);
    await run('ceph-mon', [
      ...c,
      '--mkfs',
      '-i',
      'a',
      '--monmap',
      join(dir, 'monmap'),
      '--keyring',
      join(dir, 'mon.keyring'),
    ]);
    step('monMkfs');
    startDaemon(daemons, 'mon', 'ceph-mon', [...c, '-f', '-i', 'a']);
    // The OSD's store is made while the mon starts; it needs no mon for that.
    await run('ceph-osd', [...c, '--no-mon-config', '-i', '0', '--mkfs', '--osd-uuid', osdUuid]);
    step('osdMkfs');
    const commands = [
      `osd new ${osdUuid} 0`,
      ...RGW_POOLS.map((p) => `osd pool create ${p} 8 8`),
      ...RGW_POOLS.map((p) => `osd pool application enable ${p} rgw`),
    ];
    await runWithInput(
      'ceph',
      [...c, '-n', 'client.admin', '--connect-timeout', '30'],
      `${commands.join('\n')}\n`,
    );
    step('osdAndPools');
    startDaemon(daemons, 'osd', 'ceph-osd', [...c, '-f', '-i', '0']);
    const accessKeyId = `BERTH${randomBytes(8).toString('hex').toUpperCase()}`.slice(0, 20);
    const secretAccessKey = randomBytes(30).toString('base64url');
    const startRgw = () => startDaemon(daemons, 'rgw', 'radosgw', [...c, '-f', '-n', 'client.rgw']);
    await run(
      'radosgw-admin',
      [
        ...c,
        '-n',
        'client.admin',
        'user',
        'create',
        '--uid',
        'berth',
        '--display-name',
        'berth tests',
        '--access-key',
        accessKeyId,
        '--secret',
        secretAccessKey,
      ],
      { timeout: READY_TIMEOUT_MS },
    );
    step('user');
    // After the user: radosgw and radosgw-admin both set the default zone up at first use, and racing costs seconds.
    startRgw();
    const endpoint = `http://127.0.0.1:${rgwPort}`;
    const region = 'us-east-1';
    // Imported here: the CLI imports chaos/, and the SDK is slow to load.
    const { CreateBucketCommand, ListBucketsCommand, S3Client } = await import('@aws-sdk/client-s3');
    const client = new S3Client({
      endpoint,
      region,
      forcePathStyle: true,
      credentials: { accessKeyId, secretAccessKey },
      maxAttempts: 1,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    const waitReady = () => waitForS3(() => client.send(new ListBucketsCommand({})), daemons, dir);
    await waitReady();
    step('s3Ready');
    let removed = false;
    return {
      endpoint,
      region,
      accessKeyId,
      secretAccessKey,
      dir,
      bringUpMs,
      env: () => ({
        AWS_ENDPOINT_URL_S3: endpoint,
        AWS_REGION: region,
        AWS_ACCESS_KEY_ID: accessKeyId,
        AWS_SECRET_ACCESS_KEY: secretAccessKey,
      }),
      async createBucket(name) {
        await client.send(new CreateBucketCommand({ Bucket: name }));
      },
      pids: () =>
        Object.fromEntries(
          [...daemons].filter(([, p]) => isRunning(p)).map(([name, p]) => [name, p.pid!]),
        ) as Partial<Record<Daemon, number>>,
      async rssBytes() {
        const out: Partial<Record<Daemon, number>> = {};
        for (const [name, p] of daemons) {
          const status = await readFile(`/proc/${p.pid}/status`, 'utf8').catch(() => '');
          const kib = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
          if (isRunning(p) && kib) out[name] = Number(kib) * 1024;
        }
        return out;
      },
      kill: () => stopDaemon(daemons, 'rgw'),
      async restart() {
        await stopDaemon(daemons, 'rgw');
        startRgw();
        await waitReady();
      },
      async remove() {
        if (removed) return;
        removed = true;
        client.destroy();
        await killAll();
        await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    const logs = await logTails(dir);
    await killAll();
    await rm(dir, { recursive: true, force: true });
    throw new Error(
      `The test S3 service (radosgw on one-node Ceph) did not start: ${(err as Error).message}\n${logs}`,
      {
        cause: err,
      },
    );
  }
}

function cephConf(dir: string, fsid: string, monPort: number, rgwPort: number): string {
  return `[global]
fsid = ${fsid}
mon host = v2:127.0.0.1:${monPort}
ms bind msgr1 = false
ms bind msgr2 = true
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
auth allow insecure global id reclaim = false
run dir = ${dir}/run
admin socket = ${dir}/run/$name.asok
log file = ${dir}/log/$name.log
crash dir = ${dir}/crash
mon cluster log to file = false
mon data avail warn = 1
mon data avail crit = 0
mon warn on insecure global id reclaim allowed = false
mon allow pool size one = true
mon warn on pool no redundancy = false
# A proposal a round instead of one a second: each pool is a proposal.
paxos propose interval = 0.01
paxos min wait = 0.001
# A client that started before the OSD was up re-asks for the map at its tick (default 5 s).
objecter tick interval = 0.2
# A SIGKILLed radosgw's watches lapse after this (default 30 s); until then every metadata
# change (a bucket create) waits on it. Live clients ping their watches each tick.
osd client watch timeout = 3
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
osd objectstore = memstore
memstore device bytes = ${4 * 1024 ** 3}

[mon.a]
mon data = ${dir}/mon
keyring = ${dir}/mon.keyring

[osd.0]
osd data = ${dir}/osd
keyring = ${dir}/osd/keyring

[client.admin]
keyring = ${dir}/admin.keyring

[client.rgw]
keyring = ${dir}/rgw.keyring
rgw data = ${dir}/rgw
rgw frontends = beast endpoint=127.0.0.1:${rgwPort} tcp_nodelay=1
rgw gc obj min wait = 0
# Deleted objects' data is freed by radosgw's GC (default hourly); memstore holds it in RAM.
rgw gc processor period = 10
`;
}

/** A cephx secret as Ceph writes it: base64 of (type 1 = AES, created sec + nsec, length 16, 16 random bytes), little-endian. */
function cephxKey(): string {
  const header = Buffer.alloc(12);
  const now = Date.now();
  header.writeUInt16LE(1, 0);
  header.writeUInt32LE(Math.floor(now / 1000), 2);
  header.writeUInt32LE((now % 1000) * 1_000_000, 6);
  header.writeUInt16LE(16, 10);
  return Buffer.concat([header, randomBytes(16)]).toString('base64');
}

function keyringEntry(name: string, caps: Record<string, string>): string {
  const lines = Object.entries(caps).map(([service, cap]) => `\tcaps ${service} = "${cap}"\n`);
  return `[${name}]\n\tkey = ${cephxKey()}\n${lines.join('')}`;
}

function startDaemon(daemons: Map<Daemon, ChildProcess>, name: Daemon, bin: string, args: string[]): void {
  // -f: foreground, logging to its log file; stdio carries nothing worth keeping.
  const child = spawn(bin, args, { stdio: 'ignore' });
  child.on('error', () => undefined); // a failed spawn shows as an exited process
  daemons.set(name, child);
}

async function stopDaemon(daemons: Map<Daemon, ChildProcess>, name: Daemon): Promise<void> {
  const child = daemons.get(name);
  if (!child || !isRunning(child)) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

function isRunning(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

function runWithInput(bin: string, args: string[], input: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(bin, args, { timeout: READY_TIMEOUT_MS }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${bin} ${args.join(' ')} failed: ${stderr || err.message}`, { cause: err }));
      else resolve(stdout);
    });
    child.stdin?.end(input);
  });
}

/** Until a signed ListBuckets succeeds; fails early when a daemon died. */
async function waitForS3(
  listBuckets: () => Promise<unknown>,
  daemons: Map<Daemon, ChildProcess>,
  dir: string,
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    const dead = [...daemons].filter(([, p]) => !isRunning(p)).map(([name]) => name);
    if (dead.length > 0) throw new Error(`${dead.join(', ')} exited; logs under ${dir}/log`);
    try {
      await listBuckets();
      return;
    } catch (err) {
      if (Date.now() > deadline)
        throw new Error(`S3 did not answer in ${READY_TIMEOUT_MS} ms`, { cause: err });
    }
    await sleep(50);
  }
}

async function logTails(dir: string): Promise<string> {
  const out: string[] = [];
  for (const name of ['mon.a', 'osd.0', 'client.rgw']) {
    const text = await readFile(join(dir, 'log', `${name}.log`), 'utf8').catch(() => '');
    if (text) out.push(`--- ${name}:\n${text.split('\n').slice(-15).join('\n')}`);
  }
  return out.join('\n');
}
