#!/usr/bin/env bash
# Makes sure Ceph's daemons are installed: the blob store tests (and the blobs bench) run
# a real S3 service, radosgw on a throw-away one-node Ceph cluster of their own
# (src/chaos/s3-service.ts). Installs Debian's ceph-mon, ceph-osd, radosgw and
# ceph-common when missing (root only). ceph-mgr is not needed: S3 works without it.
#
# Invariants: silent and exit 0 when ceph-mon, ceph-osd, radosgw and radosgw-admin exist;
# Debian package mirror only; never starts or enables Ceph's system services (a
# policy-rc.d keeps services from starting during the install, and no cluster is
# configured under /etc/ceph). Safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

have_all() {
  local tool
  for tool in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
    command -v "$tool" >/dev/null || return 1
  done
}
have_all && exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo 'Ceph (ceph-mon, ceph-osd, radosgw) is missing, and installing it needs root.' >&2
  echo 'Fix: run the set-up as root, or: sudo apt-get install ceph-mon ceph-osd radosgw ceph-common' >&2
  exit 1
fi

echo 'Installing Ceph (Debian packages ceph-mon ceph-osd radosgw ceph-common; no cluster is started)...'
policy=/usr/sbin/policy-rc.d
added_policy=0
if [[ ! -e $policy ]]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  added_policy=1
fi
trap 'if [[ $added_policy -eq 1 ]]; then rm -f "$policy"; fi' EXIT
apt_install ceph-mon ceph-osd radosgw ceph-common
[[ ${BERTH_SETUP_DRY_RUN:-0} == 1 ]] || have_all
