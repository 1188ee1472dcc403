# Debian packages for the set-up scripts, learnt from apt itself (never from parsing its
# files): which mirror serves this release, whether the source index is there, and
# installs of what is missing.
#
# Invariants:
# - Reads only what apt reports (`apt-get indextargets`, `apt-cache`, `apt-config`), so it
#   follows APT_CONFIG: a test points it at a throw-away configuration and nothing of the
#   machine's own apt is read or written.
# - With BERTH_SETUP_DRY_RUN=1 every apt-get that would change the machine or fetch
#   (update, install, source) is printed as `dry-run: apt-get …` instead of run; the
#   decisions and the source entry (written under apt's own sourceparts dir) are real.
# - Every failure prints what went wrong and a `Fix:` line, and returns 1.
# Sourced, never run.

apt_say() { printf '%s\n' "$*" >&2; }

apt_fail() {
  apt_say "$1"
  apt_say "Fix: $2"
  return 1
}

# apt-get with the set-up's defaults; printed instead of run in a dry run.
apt_get() {
  if [[ ${BERTH_SETUP_DRY_RUN:-0} == 1 ]]; then
    printf 'dry-run: apt-get %s\n' "$*"
    return 0
  fi
  # Another apt or dpkg run (a second set-up, unattended-upgrades) holds the lock: wait for it.
  DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"
}

# The release's codename (bookworm, trixie) from os-release.
debian_codename() {
  (
    # shellcheck disable=SC1090
    . "${BERTH_OS_RELEASE:-/etc/os-release}" && printf '%s\n' "${VERSION_CODENAME:-}"
  )
}

# The first `deb` source apt has for this release's main component, as apt reads it.
debian_mirror() {
  local codename
  codename=$(debian_codename)
  apt-get indextargets --no-release-info --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(REPO_URI)' |
    awk -v suite="$codename" '$1 == "deb" && $2 == suite && $3 == "main" { sub(/\/+$/, "", $4); print $4; exit }'
}

# Whether apt has a deb-src entry for this release's main component (downloaded or not).
debian_source_configured() {
  local codename
  codename=$(debian_codename)
  apt-get indextargets --no-release-info --format '$(TARGET_OF) $(RELEASE) $(COMPONENT)' |
    awk -v suite="$codename" '$1 == "deb-src" && $2 == suite && $3 == "main" { found = 1 } END { exit !found }'
}

# Installs the packages that are not installed (leading `-o …` arguments go to apt-get).
apt_install() {
  local need=() opts=() pkg
  while [[ ${1:-} == -o ]]; do
    opts+=("$1" "$2")
    shift 2
  done
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || need+=("$pkg")
  done
  ((${#need[@]} > 0)) || return 0
  apt_install_packages "${opts[@]}" "${need[@]}"
}

# Installs the packages, installed or not (leading options, `-o …` pairs or flags such as
# --reinstall, go to apt-get). A failed install is retried once after `apt-get update`: the
# lists may be missing or stale on a fresh machine.
apt_install_packages() {
  local opts=()
  while [[ ${1:-} == -* ]]; do
    if [[ $1 == -o ]]; then
      opts+=("$1" "$2")
      shift 2
    else
      opts+=("$1")
      shift
    fi
  done
  if [[ $(id -u) -ne 0 ]]; then
    apt_fail "Debian packages missing: $*, and installing them needs root." \
      "run the set-up as root, or: sudo apt-get install ${opts[*]} $*"
    return 1
  fi
  apt_say "installing $* (Debian packages)"
  apt_get install -y -q --no-install-recommends "${opts[@]}" "$@" && return 0
  apt_say "apt-get install failed; refreshing the package lists and trying again"
  apt_get update -q || apt_fail "apt-get update failed." \
    "check that this machine reaches its Debian mirror ($(debian_mirror)), then run the set-up again" ||
    return 1
  apt_get install -y -q --no-install-recommends "${opts[@]}" "$@" ||
    apt_fail "apt-get install $* failed (its output is above)." \
      "check that the packages exist for $(debian_codename) on $(debian_mirror), then run the set-up again"
}

# apt_install (same arguments) with the packages' services kept from starting: a
# policy-rc.d that refuses them for the install's duration, when the machine has none.
# The set-up installs servers (PostgreSQL, etcd, Patroni) the tests start on their own.
apt_install_no_start() {
  local policy=/usr/sbin/policy-rc.d added=0 rc=0
  if [[ ! -e $policy && ${BERTH_SETUP_DRY_RUN:-0} != 1 ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod +x "$policy"
    added=1
  fi
  apt_install "$@" || rc=$?
  ((added == 0)) || rm -f "$policy"
  return "$rc"
}

# Makes `apt-get source PKG` work: adds a deb-src entry for this release's mirror when
# there is none, and downloads that entry's index when it is not there yet.
ensure_source_index() {
  local pkg=$1 codename mirror parts entry keyring
  if [[ -n $(apt-cache showsrc "$pkg" 2>/dev/null) ]]; then
    apt_say "source index: present ($pkg found)"
    return 0
  fi
  codename=$(debian_codename)
  [[ -n $codename ]] || {
    apt_fail "No VERSION_CODENAME in ${BERTH_OS_RELEASE:-/etc/os-release}: this does not look like Debian." \
      "run the set-up on Debian 12 or 13, or set BERTH_KUBE_TESTS=0 to skip the Kubernetes build"
    return 1
  }
  eval "$(apt-config shell parts Dir::Etc::sourceparts/d)"
  entry=${parts%/}/berth-debian-src.sources
  if debian_source_configured; then
    apt_say "source index: configured for $codename, not downloaded yet"
    entry=
  else
    mirror=$(debian_mirror)
    [[ -n $mirror ]] || {
      apt_fail "apt has no 'deb' source for $codename main, so there is no mirror to take the source index from." \
        "add your Debian mirror to apt's sources (e.g. 'deb http://deb.debian.org/debian $codename main' in /etc/apt/sources.list), run apt-get update, then the set-up again"
      return 1
    }
    keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    apt_say "source index: adding deb-src $mirror $codename main as $entry"
    {
      printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\n' "$mirror" "$codename"
      [[ -f $keyring ]] && printf 'Signed-By: %s\n' "$keyring"
    } >"$entry"
  fi
  if [[ -n $entry ]]; then
    # Only the new entry: the other sources need no refresh for this.
    apt_get update -q -o "Dir::Etc::sourcelist=$entry" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0
  else
    apt_get update -q
  fi || {
    apt_fail "apt-get update of the source index failed." \
      "check that this machine reaches $(debian_mirror), then run the set-up again"
    return 1
  }
  [[ ${BERTH_SETUP_DRY_RUN:-0} == 1 || -n $(apt-cache showsrc "$pkg" 2>/dev/null) ]] ||
    apt_fail "apt's source index has no package $pkg for $codename." \
      "the Kubernetes test cluster needs Debian's $pkg source package (bookworm has it); set BERTH_KUBE_TESTS=0 to skip it"
}
