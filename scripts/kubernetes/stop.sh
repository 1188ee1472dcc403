#!/usr/bin/env bash
# Stops the test cluster start.sh started and leaves nothing behind: its processes (kubelets,
# Docker engines with their containerd and containers, control plane, etcd), every mount
# under its state dir (Pod volumes, engine layers, network namespaces), the cgroups its
# engines made, the sysctls the kubelet changed (restored from start.sh's record), the log
# dirs the kubelet created, and the state dir itself. Then checks that each is gone and says
# what is not. The cached binaries (build.sh) stay.
#
# Invariants: root only; safe to run when nothing is running or after a half-done start.
set -euo pipefail

state=${BERTH_KUBE_STATE:-/var/lib/berth-kube}
say() { printf 'kubernetes stack: %s\n' "$*" >&2; }
[[ $(id -u) -eq 0 ]] || {
  say "needs root"
  exit 1
}
[[ -d $state ]] || {
  say "not running"
  exit 0
}

# Processes started by start.sh, kubelets first (they would restart Pods), etcd last.
stop_process() { # name
  local file=$state/$1.pid
  [[ -f $file ]] || return 0
  local pid
  pid=$(cat "$file")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
}
for name in kubelet-runc kubelet-runsc; do stop_process "$name"; done
# Each engine stops its containers on SIGTERM (and its managed containerd with it).
for name in dockerd-runc dockerd-runsc kube-scheduler kube-controller-manager kube-apiserver etcd; do stop_process "$name"; done
# Anything still running from the state dir (a containerd-shim, a runsc sandbox, a Pod's process).
for _ in 1 2 3; do
  pids=$(pgrep -f -- "$state" || true)
  [[ -z $pids ]] && break
  kill -KILL $pids 2>/dev/null || true
  sleep 0.5
done

# Mounts, deepest first.
for _ in 1 2 3; do
  mounts=$(awk -v s="$state" 'index($5, s) == 1 {print $5}' /proc/self/mountinfo | sort -r)
  [[ -z $mounts ]] && break
  for m in $mounts; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
done

# The engines' cgroups (cgroup-parent /berth-kube-<node>), deepest first.
for root in /sys/fs/cgroup/*/berth-kube-* /sys/fs/cgroup/berth-kube-*; do
  [[ -d $root ]] || continue
  find "$root" -depth -type d -exec rmdir {} \; 2>/dev/null || true
done

if [[ -f $state/sysctl.orig ]]; then
  while IFS='=' read -r key value; do sysctl -q -w "$key=$value" >/dev/null || true; done <"$state/sysctl.orig"
fi
if [[ -f $state/created-dirs ]]; then
  while read -r dir; do [[ -n $dir ]] && rm -rf "$dir"; done <"$state/created-dirs"
fi

rm -rf "$state"

# What is left, if anything, is named.
left=()
pgrep -f -- "$state" >/dev/null && left+=("processes")
awk -v s="$state" 'index($5, s) == 1 {found=1} END {exit !found}' /proc/self/mountinfo && left+=("mounts")
compgen -G '/sys/fs/cgroup/*/berth-kube-*' >/dev/null && left+=("cgroups")
[[ -e $state ]] && left+=("$state")
if [[ ${#left[@]} -gt 0 ]]; then
  say "stopped, but left: ${left[*]}"
  exit 1
fi
say "stopped; nothing left"
