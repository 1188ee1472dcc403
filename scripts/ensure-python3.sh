#!/usr/bin/env bash
# Makes sure Debian's python3 (3.11 or newer, Debian 12's) is installed: test/python-sdk.docker.test.ts
# runs the Python SDK's tests (sdk/python) with /usr/bin/python3, never whichever python3 (pyenv,
# a venv) comes first on PATH. BERTH_PYTHON3 names the interpreter checked (default
# /usr/bin/python3; the set-up's test points it at a missing one).
#
# Invariants: silent and exit 0 when the interpreter exists and is new enough; Debian package
# mirror only; safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

python=${BERTH_PYTHON3:-/usr/bin/python3}
if [[ ! -x $python ]]; then
  if dpkg-query -W -f='${Status}' python3 2>/dev/null | grep -q 'install ok installed'; then
    # The package is there but its interpreter is gone (removed by hand): put its files back.
    # apt only warns (exit 0) when it has no list naming the package's file: refresh the lists first.
    apt_say "$python is missing though the python3 package is installed: reinstalling it"
    apt_get update -q || apt_fail "apt-get update failed." \
      "check that this machine reaches its Debian mirror ($(debian_mirror)), then run the set-up again"
    apt_install_packages --reinstall python3
  else
    apt_install python3
  fi
fi
if [[ ! -x $python ]]; then
  [[ ${BERTH_SETUP_DRY_RUN:-0} == 1 ]] && exit 0
  apt_fail "$python is still missing after installing Debian's python3." \
    "install it by hand (apt-get install --reinstall python3), or point BERTH_PYTHON3 at Debian's python3"
fi
"$python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  apt_fail "$python is $("$python" --version 2>&1), older than the Python SDK's 3.11." \
    "run make test on Debian 12 or newer (its python3 is 3.11)"
