#!/usr/bin/env bash
# Builds the Kubernetes v1.20.2 binaries the test cluster needs (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet) and the pause binary, offline, from
# Debian's `kubernetes` source package (it vendors every Go dependency).
#
# Invariants: once per machine. Binaries are cached in $BERTH_KUBE_CACHE/bin (default
# /var/cache/berth-kubernetes, outside any checkout); a binary already there is not rebuilt,
# so an interrupted build resumes with the next one. Nothing is fetched but Debian
# packages: the Go toolchain runs with GOPROXY=off and -mod=vendor.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lib/apt.sh
. "$here/../lib/apt.sh"

cache=${BERTH_KUBE_CACHE:-/var/cache/berth-kubernetes}
bin=$cache/bin
say() { printf 'kubernetes build: %s\n' "$*"; }
fail() {
  say "$1" >&2
  printf 'Fix: %s\n' "$2" >&2
  exit 1
}

wanted=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
missing=()
for name in "${wanted[@]}"; do [[ -x $bin/$name ]] || missing+=("$name"); done
if [[ ${#missing[@]} -eq 0 && -x $bin/pause ]]; then
  say "cached in $bin"
  exit 0
fi

[[ $(id -u) -eq 0 ]] ||
  fail "not root: cannot install the build tools" "run 'make setup' as root, or set BERTH_KUBE_TESTS=0 to skip the Kubernetes tests"

apt_install golang-go jq rsync dpkg-dev gcc libc6-dev || exit 1

mkdir -p "$cache/src"
tree=$(find "$cache/src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [[ -z $tree ]]; then
  ensure_source_index kubernetes || exit 1
  say "fetching Debian's kubernetes source package (34 MB)"
  if [[ ${BERTH_SETUP_DRY_RUN:-0} == 1 ]]; then
    apt_get source kubernetes
    say "dry run: stopping before the build"
    exit 0
  fi
  (cd "$cache/src" && apt-get source -q kubernetes >"$cache/source.log" 2>&1) ||
    fail "apt-get source kubernetes failed; see $cache/source.log" \
      "check that this machine reaches $(debian_mirror), then run the set-up again"
  tree=$(find "$cache/src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
  [[ -n $tree ]] || fail "apt-get source kubernetes unpacked no kubernetes-* tree in $cache/src" \
    "remove $cache/src and run the set-up again"
fi
version=$(basename "$tree")
say "source $version"

mkdir -p "$bin"
export GOFLAGS=-mod=vendor GOPROXY=off CGO_ENABLED=0 GOPATH=$tree/.go HOME=${HOME:-/root}
mkdir -p "$tree/.go/src/k8s.io"
[[ -L $tree/.go/src/k8s.io/kubernetes ]] || ln -s ../../.. "$tree/.go/src/k8s.io/kubernetes"
for name in "${missing[@]}"; do
  say "building $name (several minutes on 2 cores)"
  started=$(date +%s)
  (cd "$tree" && make WHAT="cmd/$name" >"$cache/build-$name.log" 2>&1) || {
    tail -n 15 "$cache/build-$name.log" >&2
    fail "building $name failed; see $cache/build-$name.log" \
      "the log says why (a full disk is the usual cause: df -h $cache); then run the set-up again"
  }
  install -m 0755 "$tree/_output/bin/$name" "$bin/$name.tmp" && mv "$bin/$name.tmp" "$bin/$name"
  say "built $name in $(($(date +%s) - started)) s"
done

# The pod sandbox image: the source tree's pause.c, statically linked, no registry.
if [[ ! -x $bin/pause ]]; then
  gcc -Os -static -o "$bin/pause.tmp" -DVERSION=v3.4.1 "$tree/build/pause/linux/pause.c"
  mv "$bin/pause.tmp" "$bin/pause"
fi
say "cached in $bin"
