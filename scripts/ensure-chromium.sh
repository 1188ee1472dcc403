#!/usr/bin/env bash
# Debian's chromium for the dashboard's real-browser test (playwright-core drives it with
# executablePath /usr/bin/chromium). Idempotent: does nothing when it is installed. Needs
# root and the Debian package mirror only.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

command -v chromium >/dev/null 2>&1 && exit 0
apt_install chromium
