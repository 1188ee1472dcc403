#!/usr/bin/env bash
# The Node.js that runs berth (scripts/lib/node-runtime.sh decides which).
#
#   scripts/ensure-node.sh             installs berth's pinned build when it is the one chosen
#                                      and is missing; prints what it did
#   scripts/ensure-node.sh --describe  one line: which node runs berth and why; installs nothing
#
# Invariants: idempotent, a no-op once installed. Only the npm package node-linux-<arch> is
# fetched, with npm (its registry, proxy and cache settings), and its tarball must match
# the integrity pinned in node-runtime.sh: anything else is refused before it is unpacked.
# The prefix appears whole or not at all: unpacked beside it, run once, then renamed in.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/lib/node-runtime.sh

machine=$(berth_machine_node)
machine_version=$([[ -n $machine ]] && "$machine" --version 2>/dev/null || true)
bin_dir=$(berth_node_bin_dir)
prefix=$(berth_node_prefix)

describe() {
  if [[ $bin_dir != "$prefix/bin" ]]; then
    echo "this machine's $machine_version ($machine)"
  elif [[ -n $machine_version ]]; then
    echo "berth's v$BERTH_NODE_VERSION in $prefix: this machine's $machine_version is older than $BERTH_NODE_MAJOR"
  else
    echo "berth's v$BERTH_NODE_VERSION in $prefix: this machine has no node of its own on PATH"
  fi
}

# sha512 of a file in the registry's integrity form (sha512-<base64>), by whichever node
# runs npm here (any version will do).
integrity_of() {
  node -e 'const data = require("node:fs").readFileSync(process.argv[1]);
    process.stdout.write("sha512-" + require("node:crypto").createHash("sha512").update(data).digest("base64"));' "$1"
}

install() {
  local arch package expected tarball actual
  arch=$(berth_node_arch)
  if [[ -z $arch ]]; then
    echo "ensure-node: no Node.js $BERTH_NODE_MAJOR build is published on npm for $(uname -m); install Node.js >= $BERTH_NODE_MAJOR yourself and put it first on PATH" >&2
    exit 1
  fi
  package=node-linux-$arch@$BERTH_NODE_VERSION
  expected=$(berth_node_integrity "$arch")
  mkdir -p "$(dirname "$prefix")"
  work=$(mktemp -d "$prefix.partial.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  echo "fetching $package from the npm registry ($(npm config get registry))"
  # http: a line per download, the step's progress (--json: no notice listing 2,800 files).
  (cd "$work" && npm pack --loglevel=http --json "$package" >/dev/null)
  tarball=$(find "$work" -maxdepth 1 -name '*.tgz' | head -n 1)
  actual=$(integrity_of "$tarball")
  if [[ $actual != "$expected" ]]; then
    echo "ensure-node: $package from the registry has integrity $actual, not the pinned $expected; refusing it" >&2
    exit 1
  fi
  echo "integrity $actual matches the pinned one; unpacking"
  mkdir "$work/root"
  tar -xzf "$tarball" -C "$work/root" --strip-components=1 --no-same-owner
  if [[ $("$work/root/bin/node" --version) != "v$BERTH_NODE_VERSION" ]]; then
    echo "ensure-node: the unpacked $work/root/bin/node does not report v$BERTH_NODE_VERSION" >&2
    exit 1
  fi
  rm -rf "$prefix"
  mv "$work/root" "$prefix"
  echo "installed Node.js v$BERTH_NODE_VERSION in $prefix (headers in $prefix/include/node)"
}

work=
case ${1:-} in
--describe) describe ;;
'')
  if [[ $bin_dir != "$prefix/bin" ]]; then
    echo "using $(describe); nothing to install"
  elif [[ -x $prefix/bin/node && $("$prefix/bin/node" --version 2>/dev/null) == "v$BERTH_NODE_VERSION" ]]; then
    echo "Node.js v$BERTH_NODE_VERSION already installed in $prefix"
  else
    install
  fi
  ;;
*)
  echo "ensure-node: unknown argument '$1'. Fix: run it without arguments, or with --describe." >&2
  exit 2
  ;;
esac
