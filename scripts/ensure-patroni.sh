#!/usr/bin/env bash
# Makes sure Patroni (Debian's `patroni`, 3.0 on bookworm) and etcd (`etcd-server`, 3.4)
# are installed: test/store.patroni.test.ts, test/chaos.patroni.docker.test.ts and
# `berth chaos --store patroni` start throw-away HA clusters of their own with them (one
# etcd, Patroni members over the PostgreSQL already installed). Installs both when
# missing (root only).
#
# Invariants: silent and exit 0 when `patroni` and `etcd` are on the PATH; never upgrades
# the installed PostgreSQL packages (APT::Get::Upgrade=false, apt-get's --no-upgrade:
# the running test clusters use those binaries); never starts the packages' services
# (a policy-rc.d keeps them from starting during the install, as for PostgreSQL). Debian
# package mirror only; safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

command -v patroni >/dev/null && command -v etcd >/dev/null && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo 'Patroni or etcd is missing, and installing them needs root.' >&2
  echo 'Fix: run the set-up as root, or: sudo apt-get install --no-upgrade patroni etcd-server' >&2
  exit 1
fi
apt_install_no_start -o APT::Get::Upgrade=false -o Dpkg::Options::=--force-confold patroni etcd-server
command -v patroni >/dev/null && command -v etcd >/dev/null
