#!/usr/bin/env bash
# Set-up of a checkout, in named, timed steps (scripts/lib/steps.sh).
#
#   scripts/setup.sh demo   what `make demo` needs: dependencies, build, Docker, base image
#   scripts/setup.sh test   everything `make test` needs: the above, then the agent images of
#                           the harnesses (Claude Code, Codex, opencode; BERTH_HARNESS_TESTS=0
#                           skips them), chromium, gVisor, PostgreSQL, Ceph (radosgw),
#                           iproute2, HAProxy, Debian's python3, Postfix with Dovecot (the email
#                           channel's test), Patroni with etcd and the Kubernetes test
#                           cluster's binaries
#                           (BERTH_KUBE_TESTS=0 skips the last)
#
# The first step picks the Node.js that runs berth (scripts/ensure-node.sh: the machine's
# when it is new enough, else berth's pinned build from the npm registry) and every later
# step runs on it: npm ci (an addon that compiles does so against its headers), tsc, and
# the image build, which copies that node into the sandbox image.
#
# Invariants: re-running is cheap, every step checks before it acts. `npm ci` runs only when
# node_modules is missing, or package-lock.json or the runtime changed since the last
# successful install (the lock's sha256 and the node version are kept in
# node_modules/.berth-lock-sha256, written only after npm ci succeeds); the image build is a
# no-op when the image for this recipe exists. Stops at the first failing step, which names
# itself, shows its log's last lines and a `Fix:`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib/steps.sh

target=${1:-test}
case $target in
demo | test) ;;
*)
  echo "setup: unknown target '$target'." >&2
  echo "Fix: run scripts/setup.sh demo (what make demo needs) or scripts/setup.sh test (everything)." >&2
  exit 2
  ;;
esac

npm_dependencies() {
  local lock_sha stamp=node_modules/.berth-lock-sha256
  # Native addons are built for one runtime's ABI: a new node means a new install.
  lock_sha="$(sha256sum package-lock.json | cut -d' ' -f1) node $(node --version)"
  if [[ -d node_modules && -f $stamp && "$(cat "$stamp")" == "$lock_sha" ]]; then
    echo "up to date"
    return 0
  fi
  npm ci --no-audit --no-fund --loglevel=http # http: a line per download, the step's progress
  printf '%s\n' "$lock_sha" >"$stamp"
}

set_up_started=$(_steps_now_ms)
. scripts/lib/node-runtime.sh
step "Node.js runtime ($(scripts/ensure-node.sh --describe))" \
  "check that this machine reaches the npm registry (npm ping) and can write $(dirname "$(berth_node_prefix)") (BERTH_NODE_HOME moves it); or put a Node.js >= $BERTH_NODE_MAJOR first on PATH" \
  scripts/ensure-node.sh
node_bin_dir=$(berth_node_bin_dir)
export PATH=$node_bin_dir:$PATH
if [[ $node_bin_dir == "$(berth_node_prefix)/bin" ]]; then
  # node-gyp builds against this runtime's own headers: never downloaded ones, nor the
  # machine's (npm's global config may name those of its older node).
  export npm_config_nodedir=${node_bin_dir%/bin}
fi
step "dependencies (npm ci)" "read the npm error above; check that this machine reaches the npm registry (npm ping)" \
  npm_dependencies
step "build (tsc)" "the TypeScript errors are above; fix them and run again" npm run build --silent
step "docker engine" "see the message above" scripts/ensure-docker.sh
step "sandbox base image (debootstrap, cached by recipe hash)" \
  "see the message above; 'node bin/berth.js image build' runs this step alone" node bin/berth.js image build

# One agent image per harness (what `berth agent create NAME --provider <harness>` uses), from
# the npm registry onto the cached base root; a no-op for an image whose recipe is built.
harness_images() {
  local harness
  for harness in claude-code codex opencode; do
    node bin/berth.js image build --with "$harness"
  done
}

if [[ $target == test ]]; then
  if [[ ${BERTH_HARNESS_TESTS:-1} != 0 ]]; then
    step "agent images of the harnesses (npm registry, about 1 min each the first time)" \
      "see the message above; check that this machine reaches the npm registry (npm ping), or set BERTH_HARNESS_TESTS=0 to skip the harness tests" \
      harness_images
  elif [[ ${BERTH_REQUIRE_ALL_SUITES:-0} == 1 ]]; then
    echo "==> agent images of the harnesses: BERTH_REQUIRE_ALL_SUITES=1 needs them, but BERTH_HARNESS_TESTS=0 is set" >&2
    echo "Fix: run without BERTH_HARNESS_TESTS=0 (docs/model-agents.md)" >&2
    exit 1
  else
    echo "==> agent images of the harnesses: skipped (BERTH_HARNESS_TESTS=0)"
  fi
  step "chromium (dashboard browser test)" "see the message above" scripts/ensure-chromium.sh
  step "gVisor tier (runsc)" "see the message above" scripts/ensure-runsc.sh
  step "PostgreSQL server binaries" "see the message above" scripts/ensure-postgres.sh
  # The real S3 service of the blob store tests: radosgw on a one-node Ceph each test starts.
  step "Ceph daemons (radosgw, the test S3 service)" "see the message above" scripts/ensure-ceph.sh
  step "network namespaces (iproute2)" "see the message above" scripts/ensure-iproute2.sh
  step "HAProxy (the load balancer of the API-replicas test)" "see the message above" scripts/ensure-haproxy.sh
  step "Python 3 (Debian's, for the Python SDK's tests)" "see the message above" scripts/ensure-python3.sh
  step "Postfix and Dovecot (the mail servers of the email channel's test)" "see the message above" scripts/ensure-mail.sh
  step "Patroni and etcd (replicated PostgreSQL, without upgrading PostgreSQL)" "see the message above" \
    scripts/ensure-patroni.sh
  # A real cluster for test/kubernetes.docker.test.ts, built once per machine from Debian's
  # kubernetes source package (about 10 min on 2 cores; cached outside the checkout).
  if [[ ${BERTH_KUBE_TESTS:-1} != 0 && $(id -u) -eq 0 ]]; then
    step "Kubernetes test cluster binaries (once per machine, ~10 min)" \
      "see the message above, or set BERTH_KUBE_TESTS=0 to skip the Kubernetes tests" scripts/kubernetes/build.sh
  elif [[ ${BERTH_REQUIRE_ALL_SUITES:-0} == 1 ]]; then
    echo "==> Kubernetes test cluster: BERTH_REQUIRE_ALL_SUITES=1 needs it, but BERTH_KUBE_TESTS=0 is set or this is not root" >&2
    echo "Fix: run as root without BERTH_KUBE_TESTS=0 (docs/kubernetes.md)" >&2
    exit 1
  else
    echo "==> Kubernetes test cluster: skipped (BERTH_KUBE_TESTS=0 or not root)"
  fi
fi
printf 'setup (%s): ready in %s\n' "$target" "$(_steps_duration $(($(_steps_now_ms) - set_up_started)))"
