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

cache=${BERTH_KUBE_CACHE:-/var/cache/berth-kubernetes}
bin=$cache/bin
say() { printf 'kubernetes build: %s\n' "$*"; }

wanted=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
missing=()
for name in "${wanted[@]}"; do [[ -x $bin/$name ]] || missing+=("$name"); done
if [[ ${#missing[@]} -eq 0 && -x $bin/pause ]]; then
  say "cached in $bin"
  exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
  say "not root: cannot install the build tools; run 'make setup' as root"
  exit 1
fi

apt_install() {
  local need=()
  for pkg in "$@"; do dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg"); done
  [[ ${#need[@]} -eq 0 ]] || DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
}
apt_install golang-go jq rsync dpkg-dev gcc libc6-dev

src_list=/etc/apt/sources.list.d/berth-kubernetes-src.sources
mkdir -p "$cache/src"
tree=$(find "$cache/src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
if [[ -z $tree ]]; then
  if ! apt-cache showsrc kubernetes >/dev/null 2>&1; then
    # Debian's source index is not enabled by default; add it beside the binary one.
    uri=$(grep -h -m1 -oE 'https?://[^ ]*debian/?' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | head -n1)
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "${uri:-http://deb.debian.org/debian}" "$suite" >"$src_list"
    apt-get update -q >/dev/null
  fi
  say "fetching Debian's kubernetes source package"
  (cd "$cache/src" && apt-get source -q kubernetes >/dev/null 2>&1)
  tree=$(find "$cache/src" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
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
    say "building $name failed; see $cache/build-$name.log"
    exit 1
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
