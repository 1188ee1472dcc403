#!/usr/bin/env bash
# Debian's chromium for the dashboard's real-browser test (playwright-core drives it with
# executablePath /usr/bin/chromium). Idempotent: does nothing when it is installed. Needs
# root and the Debian package mirror only.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "ensure-chromium: chromium is missing and installing it needs root: apt-get install chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
command -v chromium >/dev/null
