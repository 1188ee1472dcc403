/**
 * The set-up scripts' decisions on the machine layouts they must handle, against a
 * throw-away apt configuration (APT_CONFIG: its own Dir::Etc, Dir::State, Dir::Cache), so
 * nothing of this machine's apt is read or written. BERTH_SETUP_DRY_RUN=1 turns the apt
 * calls that would fetch or install into printed lines; the decisions, and the source
 * entry written under the throw-away sourceparts dir, are real.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { scriptRunner } from './helpers/script-runner.js';

const REPO = join(import.meta.dirname, '..', '..');
const BUILD = join(REPO, 'scripts', 'kubernetes', 'build.sh');
const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

interface Layout {
  /** Files under etc/apt, by path relative to it. */
  etc: Record<string, string>;
  codename?: string;
  /** A downloaded source index (lists file) naming the kubernetes package. */
  sourceIndexFrom?: string;
  /** Executables already in the Kubernetes cache's bin dir. */
  cached?: string[];
}

function machine(layout: Layout) {
  const root = mkdtempSync(join(tmpdir(), 'berth-setup-test-'));
  roots.push(root);
  const etc = join(root, 'etc', 'apt');
  for (const dir of ['sources.list.d', 'apt.conf.d', 'preferences.d', 'trusted.gpg.d'])
    mkdirSync(join(etc, dir), { recursive: true });
  for (const [path, text] of Object.entries(layout.etc)) writeFileSync(join(etc, path), text);
  const lists = join(root, 'state', 'lists');
  mkdirSync(join(lists, 'partial'), { recursive: true });
  mkdirSync(join(root, 'cache', 'archives', 'partial'), { recursive: true });
  if (layout.sourceIndexFrom) {
    writeFileSync(
      join(lists, `${layout.sourceIndexFrom}_dists_${layout.codename ?? 'bookworm'}_main_source_Sources`),
      'Package: kubernetes\nBinary: kubernetes-client\nVersion: 1.20.5+really1.20.2-1\nMaintainer: x\n' +
        'Architecture: any\nFormat: 3.0 (quilt)\nDirectory: pool/main/k/kubernetes\nFiles:\n 0 1 kubernetes.dsc\n\n',
    );
  }
  const conf = join(root, 'apt.conf');
  writeFileSync(
    conf,
    `Dir::Etc "${etc}";\nDir::State "${join(root, 'state')}";\nDir::Cache "${join(root, 'cache')}";\n`,
  );
  const osRelease = join(root, 'os-release');
  writeFileSync(osRelease, `ID=debian\nVERSION_CODENAME=${layout.codename ?? 'bookworm'}\n`);
  const cache = join(root, 'kube-cache');
  mkdirSync(join(cache, 'bin'), { recursive: true });
  for (const name of layout.cached ?? []) {
    writeFileSync(join(cache, 'bin', name), '#!/bin/sh\n');
    chmodSync(join(cache, 'bin', name), 0o755);
  }
  // The switches a developer may have exported would change the decisions under test.
  const {
    BERTH_KUBE_TESTS: _k,
    BERTH_HARNESS_TESTS: _h,
    BERTH_REQUIRE_ALL_SUITES: _r,
    ...inherited
  } = process.env;
  const env = {
    ...inherited,
    APT_CONFIG: conf,
    BERTH_OS_RELEASE: osRelease,
    BERTH_KUBE_CACHE: cache,
    BERTH_SETUP_DRY_RUN: '1',
    BERTH_SETUP_LOGS: join(root, 'logs'),
  };
  const run = scriptRunner(env, REPO);
  const entryPath = join(etc, 'sources.list.d', 'berth-debian-src.sources');
  const sourceTargets = () =>
    run(['apt-get', 'indextargets', '--no-release-info', '--format', '$(TARGET_OF) $(REPO_URI) $(RELEASE)'])
      .out.split('\n')
      .filter((l) => l.startsWith('deb-src '));
  return { run, entryPath, sourceTargets, cache };
}

// This machine's kind, as it comes: deb822 only, a comment line naming a snapshot mirror
// before the real URIs field, no sources.list, no deb-src.
const DEB822_WITH_COMMENTS =
  'Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\n' +
  'Suites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n' +
  'Types: deb\n# http://snapshot.debian.org/archive/debian-security/20250520T000000Z\n' +
  'URIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n' +
  'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n';

test('deb822 sources with comments and no sources.list: the source entry takes the URIs field, never a comment', () => {
  const m = machine({ etc: { 'sources.list.d/debian.sources': DEB822_WITH_COMMENTS } });
  const r = m.run([BUILD]);
  assert.equal(r.code, 0, r.out);
  const entry = readFileSync(m.entryPath, 'utf8');
  assert.match(entry, /^Types: deb-src$/m);
  assert.match(entry, /^URIs: http:\/\/deb\.debian\.org\/debian$/m);
  assert.match(entry, /^Suites: bookworm$/m);
  assert.doesNotMatch(entry, /snapshot/);
  // apt itself reads the entry, and only it is refreshed.
  assert.deepEqual(m.sourceTargets(), ['deb-src http://deb.debian.org/debian/ bookworm']);
  assert.match(r.out, new RegExp(`dry-run: apt-get update -q -o Dir::Etc::sourcelist=${m.entryPath} `));
  assert.match(r.out, /dry-run: apt-get source kubernetes/);
});

test('a classic sources.list on Debian 13: its mirror and release', () => {
  const m = machine({
    codename: 'trixie',
    etc: {
      'sources.list':
        '# deb http://snapshot.example/debian trixie main\ndeb http://ftp.fr.debian.org/debian/ trixie main contrib\n' +
        'deb http://ftp.fr.debian.org/debian/ trixie-updates main\ndeb http://security.debian.org/debian-security trixie-security main\n',
    },
  });
  const r = m.run([BUILD]);
  assert.equal(r.code, 0, r.out);
  assert.match(
    readFileSync(m.entryPath, 'utf8'),
    /^URIs: http:\/\/ftp\.fr\.debian\.org\/debian\nSuites: trixie$/m,
  );
  assert.deepEqual(m.sourceTargets(), ['deb-src http://ftp.fr.debian.org/debian/ trixie']);
});

test('a source index already configured and downloaded: nothing is added, nothing refreshed', () => {
  const m = machine({
    etc: {
      'sources.list':
        'deb http://deb.debian.org/debian bookworm main\ndeb-src http://deb.debian.org/debian bookworm main\n',
    },
    sourceIndexFrom: 'deb.debian.org_debian',
  });
  const r = m.run([BUILD]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /source index: present/);
  assert.equal(existsSync(m.entryPath), false);
  assert.doesNotMatch(r.out, /apt-get update/);
});

test('a source index configured but not downloaded: refreshed, no second entry', () => {
  const m = machine({
    etc: {
      'sources.list.d/debian.sources': DEB822_WITH_COMMENTS.replace('Types: deb\n', 'Types: deb deb-src\n'),
    },
  });
  const r = m.run([BUILD]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /configured for bookworm, not downloaded yet/);
  assert.equal(existsSync(m.entryPath), false);
  assert.match(r.out, /dry-run: apt-get update -q\n/);
});

test('binaries cached: no apt call at all', () => {
  const m = machine({
    etc: {},
    cached: ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubelet', 'pause'],
  });
  const r = m.run([BUILD]);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, new RegExp(`cached in ${m.cache}/bin`));
  assert.doesNotMatch(r.out, /apt-get/);
});

test('no Debian source in apt at all: fails saying so, with a Fix', () => {
  const m = machine({
    etc: { 'sources.list': 'deb http://download.docker.com/linux/debian bookworm stable\n' },
  });
  const r = m.run([BUILD]);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /apt has no 'deb' source for bookworm main/);
  assert.match(r.out, /^Fix: add your Debian mirror/m);
  assert.equal(existsSync(m.entryPath), false);
});

test('a failing step names itself, shows its last lines and a Fix, and stops the set-up', () => {
  const m = machine({ etc: {} });
  const r = m.run([
    'bash',
    '-c',
    'set -euo pipefail; . scripts/lib/steps.sh; BERTH_SETUP_DRY_RUN=0; ' +
      'step "first" "unused" true; step "mirror probe" "check the mirror" sh -c "echo reached nothing >&2; exit 7"; ' +
      'echo never reached',
  ]);
  assert.equal(r.code, 1, r.out);
  assert.match(r.out, /==> first\n {4}first: done in \d+\.\d s/);
  assert.match(r.out, /setup: step "mirror probe" failed after \d+\.\d s \(exit code 7\)/);
  assert.match(r.out, /^ {4}reached nothing$/m);
  assert.match(r.out, /^Fix: check the mirror$/m);
  assert.doesNotMatch(r.out, /never reached/);
});

test('make demo sets up only what the demo needs; make test everything', () => {
  const m = machine({ etc: {} });
  const demo = m.run(['bash', 'scripts/setup.sh', 'demo']);
  assert.equal(demo.code, 0, demo.out);
  const steps = (out: string) => [...out.matchAll(/^==> (.*)$/gm)].map((x) => x[1]!.split(' (')[0]);
  assert.deepEqual(steps(demo.out), [
    'Node.js runtime',
    'dependencies',
    'build',
    'docker engine',
    'sandbox base image',
  ]);
  const all = m.run(['bash', 'scripts/setup.sh', 'test']);
  assert.equal(all.code, 0, all.out);
  for (const wanted of [
    'agent images of the harnesses',
    'chromium',
    'gVisor tier',
    'PostgreSQL server binaries',
    'Ceph daemons',
    'Python 3',
    'Postfix and Dovecot',
    'Patroni and etcd',
    'Kubernetes test cluster binaries',
  ])
    assert.ok(steps(all.out).includes(wanted), `${wanted} in ${all.out}`);
  // CI (BERTH_REQUIRE_ALL_SUITES=1) must not set up less than every suite needs.
  for (const skip of ['BERTH_HARNESS_TESTS', 'BERTH_KUBE_TESTS']) {
    const partial = m.run(['bash', 'scripts/setup.sh', 'test'], {
      [skip]: '0',
      BERTH_REQUIRE_ALL_SUITES: '1',
    });
    assert.equal(partial.code, 1, partial.out);
    assert.match(partial.out, new RegExp(`BERTH_REQUIRE_ALL_SUITES=1 needs (them|it), but ${skip}=0 is set`));
    assert.match(partial.out, /^Fix: run (as root )?without /m);
  }
  const wrong = m.run(['bash', 'scripts/setup.sh', 'everything']);
  assert.equal(wrong.code, 2);
  assert.match(wrong.out, /^Fix: run scripts\/setup.sh demo/m);
});

test('ensure-runsc where the gVisor tier cannot be had: exit 0 (its tests skip), or exit 1 naming it under BERTH_REQUIRE_ALL_SUITES=1', () => {
  // Not root is one such machine; root runs the script as nobody to be one.
  const [command, ...prefix] =
    process.getuid?.() === 0
      ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups', 'bash']
      : ['bash'];
  const run = (env: Record<string, string>) => {
    const { BERTH_REQUIRE_ALL_SUITES: _, ...rest } = process.env;
    return spawnSync(command!, [...prefix, join(REPO, 'scripts', 'ensure-runsc.sh')], {
      encoding: 'utf8',
      env: { ...rest, ...env },
    });
  };
  const optional = run({});
  assert.equal(optional.status, 0, optional.stderr);
  assert.match(optional.stdout, /not root .*the gVisor tier is unavailable \(its tests skip\)/);
  const required = run({ BERTH_REQUIRE_ALL_SUITES: '1' });
  assert.equal(required.status, 1);
  assert.match(required.stdout, /BERTH_REQUIRE_ALL_SUITES=1 needs the gVisor tier/);
});

test("ensure-python3 with Debian's python3 missing: installs the package, or reinstalls it when only the interpreter is gone; refuses one older than 3.11", () => {
  const m = machine({ etc: {} });
  const script = ['bash', 'scripts/ensure-python3.sh'];
  /** The interpreter missing, and dpkg-query (first on PATH) saying whether the package is installed. */
  const missing = (dpkgSays: string) => {
    const bin = mkdtempSync(join(m.cache, 'bin-'));
    writeFileSync(join(bin, 'dpkg-query'), `#!/bin/sh\nprintf '%s' '${dpkgSays}'\n`);
    chmodSync(join(bin, 'dpkg-query'), 0o755);
    return { BERTH_PYTHON3: join(bin, 'python3'), PATH: `${bin}:${process.env.PATH}` };
  };
  const fresh = m.run(script, missing('unknown ok not-installed'));
  assert.equal(fresh.code, 0, fresh.out);
  assert.match(fresh.out, /^dry-run: apt-get install -y -q --no-install-recommends python3$/m);
  const gone = m.run(script, missing('install ok installed'));
  assert.equal(gone.code, 0, gone.out);
  assert.match(
    gone.out,
    /^dry-run: apt-get update -q\ndry-run: apt-get install -y -q --no-install-recommends --reinstall python3$/m,
  );
  const old = join(m.cache, 'old-python3');
  writeFileSync(old, '#!/bin/sh\necho Python 3.9.2; exit 1\n');
  chmodSync(old, 0o755);
  const refused = m.run(script, { BERTH_PYTHON3: old, BERTH_SETUP_DRY_RUN: '0' });
  assert.equal(refused.code, 1, refused.out);
  assert.match(refused.out, /older than the Python SDK's 3\.11\.\nFix: /);
});
