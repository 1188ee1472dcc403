#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries (initdb, pg_ctl, postgres) are installed: the
# tests and `berth chaos --store postgres` start throw-away clusters of their own with
# them. Installs Debian's `postgresql` package when they are missing (root only).
#
# Invariants: silent and exit 0 when /usr/lib/postgresql/<ver>/bin/initdb exists; never
# creates or starts the machine's default cluster (createcluster.conf says so before the
# install, and a policy-rc.d keeps services from starting during it). Safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo 'PostgreSQL server binaries are missing, and installing them needs root.' >&2
  echo 'Fix: run the set-up as root, or: sudo apt-get install postgresql' >&2
  exit 1
fi

echo 'Installing PostgreSQL (Debian package postgresql; no default cluster)...'
conf=/etc/postgresql-common/createcluster.conf
if [[ ! -f $conf ]]; then
  mkdir -p "$(dirname "$conf")"
  echo 'create_main_cluster = false' >"$conf"
fi
apt_install_no_start -o Dpkg::Options::=--force-confold postgresql
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null
