#!/usr/bin/env bash
# Makes sure Debian's Postfix and Dovecot (IMAP and LMTP) are installed: the real mail
# servers of test/channels-email.docker.test.ts. The test runs its own instances, on high
# ports with their configuration, queue and mailboxes in a temp dir; the services the
# packages would start are kept from starting (and are never used).
#
# Invariants: silent and exit 0 when all three exist; Debian package mirror only; no
# question asked (Postfix's debconf answer is preseeded: "Local only"); safe to re-run.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

packages=(postfix dovecot-imapd dovecot-lmtpd)
missing=0
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing=1
done
((missing == 1)) || exit 0

if [[ ${BERTH_SETUP_DRY_RUN:-0} != 1 && $(id -u) -eq 0 ]]; then
  # Postfix asks how mail is delivered; the tests need no system mail at all.
  printf '%s\n' \
    'postfix postfix/main_mailer_type select Local only' \
    "postfix postfix/mailname string $(hostname -f 2>/dev/null || hostname)" |
    debconf-set-selections
fi
apt_install_no_start "${packages[@]}"
