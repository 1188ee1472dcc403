#!/usr/bin/env bash
# Makes sure `haproxy` (Debian's package) is installed: the load balancer in front of two
# API processes in test/api-replicas.docker.test.ts, as docs/scale-out.md deploys them.
# The test runs its own haproxy in the foreground on its own ports; the service the package
# may start is not used.
#
# Invariants: silent and exit 0 when haproxy exists; Debian package mirror only; safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

command -v haproxy >/dev/null && exit 0
apt_install haproxy
