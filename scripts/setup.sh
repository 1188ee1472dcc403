#!/usr/bin/env bash
# One-shot set-up of a checkout: dependencies, build, Docker, sandbox base image, PostgreSQL
# server binaries (for the tests' throw-away clusters).
#
# Invariants: re-running is cheap. `npm ci` runs only when node_modules is missing or
# package-lock.json changed since the last successful install (its sha256 is kept in
# node_modules/.berth-lock-sha256, written only after npm ci succeeds); the image build is a
# no-op when the image for this recipe exists. Stops at the first failing step.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '==> %s\n' "$*"; }

lock_sha=$(sha256sum package-lock.json | cut -d' ' -f1)
stamp=node_modules/.berth-lock-sha256
if [[ -d node_modules && -f "$stamp" && "$(cat "$stamp")" == "$lock_sha" ]]; then
  step "dependencies: up to date"
else
  step "dependencies: npm ci"
  npm ci
  printf '%s\n' "$lock_sha" >"$stamp"
fi

step "build: npm run build"
npm run build --silent

step "docker: scripts/ensure-docker.sh"
scripts/ensure-docker.sh

step "chromium (dashboard browser test): scripts/ensure-chromium.sh"
scripts/ensure-chromium.sh

step "gVisor tier: scripts/ensure-runsc.sh"
scripts/ensure-runsc.sh

step "base image: berth image build"
node bin/berth.js image build

step "postgresql: scripts/ensure-postgres.sh"
scripts/ensure-postgres.sh

step "network namespaces (chaos --partition-worker): scripts/ensure-iproute2.sh"
scripts/ensure-iproute2.sh

# The Kubernetes tests (test/kubernetes.docker.test.ts) need a real cluster, built once per
# machine from Debian's kubernetes source package (~10 min on 2 cores; cached outside the
# checkout). BERTH_KUBE_TESTS=0 skips the build and those tests.
if [[ ${BERTH_KUBE_TESTS:-1} != 0 && $(id -u) -eq 0 ]]; then
  step "kubernetes test cluster binaries: scripts/kubernetes/build.sh"
  scripts/kubernetes/build.sh
else
  step "kubernetes test cluster: skipped (BERTH_KUBE_TESTS=0 or not root)"
fi
