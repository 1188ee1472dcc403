#!/usr/bin/env bash
# Makes sure `ip` (Debian's iproute2) and `nsenter` (util-linux) are installed: the
# partition fault of `berth chaos --partition-worker` (and its test) puts each worker in a
# network namespace with a veth to the host and cuts that link. Installs them when
# missing (root only).
#
# Invariants: silent and exit 0 when both tools exist; Debian package mirror only; safe
# to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

command -v ip >/dev/null && command -v nsenter >/dev/null && exit 0
apt_install iproute2 util-linux
