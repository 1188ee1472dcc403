# The Node.js that runs berth: this machine's own `node` when its major is at least
# BERTH_NODE_MAJOR, otherwise an exactly pinned build that scripts/ensure-node.sh installs
# from the npm registry (the node-linux-<arch> package: the official binary and its headers)
# into a prefix berth owns. One place says which version and where; the set-up, the Makefile
# (through scripts/with-node.sh) and the `berth` command (bin/berth) all read it.
#
# Sourced by POSIX sh and by bash: no bashisms. Defines only functions and constants.

BERTH_NODE_MAJOR=24
BERTH_NODE_VERSION=24.22.3

# The npm package's architecture name for this machine, or nothing where no build is published.
berth_node_arch() {
  case $(uname -m) in
  x86_64 | amd64) echo x64 ;;
  aarch64 | arm64) echo arm64 ;;
  *) echo '' ;;
  esac
}

# The registry's sha512 integrity of node-linux-<arch>@BERTH_NODE_VERSION, pinned here so a
# tarball the registry serves differently later is refused, not run.
berth_node_integrity() {
  case $1 in
  x64) echo 'sha512-KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==' ;;
  arm64) echo 'sha512-IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw==' ;;
  *) echo '' ;;
  esac
}

# Where berth's own build lives: $BERTH_NODE_HOME, else /opt/berth for root (one per
# machine, shared by checkouts) and ~/.local/share/berth for anyone else.
berth_node_prefix() {
  if [ -n "${BERTH_NODE_HOME:-}" ]; then
    home=$BERTH_NODE_HOME
  elif [ "$(id -u)" -eq 0 ]; then
    home=/opt/berth
  else
    home=${XDG_DATA_HOME:-$HOME/.local/share}/berth
  fi
  echo "$home/node-v$BERTH_NODE_VERSION-linux-$(berth_node_arch)"
}

# The major version of the node at $1 ("20" for v20.20.2), or nothing if it does not run.
berth_node_major_of() {
  "$1" --version 2>/dev/null | sed -n 's/^v\([0-9][0-9]*\)\..*/\1/p'
}

# This machine's own node (the first on PATH that is not berth's build), or nothing.
berth_machine_node() {
  own_dir=$(berth_node_prefix)/bin
  saved_ifs=$IFS
  IFS=:
  for dir in $PATH; do
    [ -n "$dir" ] && [ "$dir" != "$own_dir" ] && [ -x "$dir/node" ] && [ ! -d "$dir/node" ] && {
      IFS=$saved_ifs
      echo "$dir/node"
      return 0
    }
  done
  IFS=$saved_ifs
  return 0
}

# The directory of the node that runs berth: the machine's when new enough, else berth's
# build (which may still have to be installed: check "$dir/node" before use).
berth_node_bin_dir() {
  machine=$(berth_machine_node)
  if [ -n "$machine" ]; then
    major=$(berth_node_major_of "$machine")
    if [ -n "$major" ] && [ "$major" -ge "$BERTH_NODE_MAJOR" ]; then
      dirname "$machine"
      return 0
    fi
  fi
  echo "$(berth_node_prefix)/bin"
}
