#!/bin/sh
# Runs a command with the Node.js that runs berth first on PATH (scripts/lib/node-runtime.sh):
# `scripts/with-node.sh node bin/berth.js up`. The Makefile's commands and bin/berth go
# through it; it installs nothing, so a missing build is an error that says how to get it.
set -eu
root=$(CDPATH='' cd -- "$(dirname -- "$0")/.." && pwd)
. "$root/scripts/lib/node-runtime.sh"
dir=$(berth_node_bin_dir)
if [ ! -x "$dir/node" ]; then
  echo "berth: it runs on Node.js >= $BERTH_NODE_MAJOR; this machine's node is older and berth's v$BERTH_NODE_VERSION is not installed in $(berth_node_prefix)." >&2
  echo "Fix: run 'make setup-demo' in $root (or scripts/ensure-node.sh), or put a Node.js >= $BERTH_NODE_MAJOR first on PATH." >&2
  exit 1
fi
PATH=$dir:$PATH
export PATH
exec "$@"
