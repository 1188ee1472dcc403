#!/usr/bin/env bash
# Makes sure `ip` (Debian's iproute2) and `nsenter` (util-linux) are installed: the
# partition fault of `berth chaos --partition-worker` (and its test) puts each worker in a
# network namespace with a veth to the host and cuts that link. Installs iproute2 when
# missing (root only).
#
# Invariants: silent and exit 0 when both tools exist; Debian package mirror only; safe
# to re-run.
set -euo pipefail

if command -v ip >/dev/null && command -v nsenter >/dev/null; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo 'ip (iproute2) or nsenter (util-linux) is missing: run as root, or apt-get install iproute2 util-linux' >&2
  exit 1
fi
echo 'Installing iproute2 and util-linux (ip, nsenter)...'
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iproute2 util-linux >/dev/null
command -v ip >/dev/null && command -v nsenter >/dev/null
