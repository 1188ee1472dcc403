#!/usr/bin/env bash
# Makes sure the Docker Engine API answers on its Unix socket, installing and starting dockerd
# when this is root on Debian; otherwise says in one line what to install or start.
#
# Invariants: silent and exit 0 when the engine already answers; never installs or starts
# anything then. Safe to run repeatedly. The probe needs node or curl (node first: a fresh
# machine running berth has node but maybe no curl). Exit 1 when Docker cannot be made to answer.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

socket=/var/run/docker.sock
if [[ "${DOCKER_HOST:-}" == unix://* ]]; then
  socket="${DOCKER_HOST#unix://}"
fi
log=/var/log/berth-dockerd.log

# Exit status: 0 the engine answers /_ping, 2 permission denied on the socket, 1 anything else.
probe() {
  if command -v node >/dev/null 2>&1; then
    node -e '
      const req = require("node:http").get({ socketPath: process.argv[1], path: "/_ping", timeout: 2000 }, (res) => {
        res.resume();
        process.exit(res.statusCode === 200 ? 0 : 1);
      });
      req.on("timeout", () => req.destroy(new Error("timeout")));
      req.on("error", (err) => process.exit(err.code === "EACCES" ? 2 : 1));
    ' "$socket"
  elif command -v curl >/dev/null 2>&1; then
    local code=0
    curl --silent --fail --max-time 2 --unix-socket "$socket" http://localhost/_ping >/dev/null || code=$?
    if [[ $code -ne 0 && -S "$socket" && ! -w "$socket" ]]; then return 2; fi
    return $(( code == 0 ? 0 : 1 ))
  else
    echo "ensure-docker: neither node nor curl is installed, cannot probe $socket" >&2
    return 1
  fi
}

# Non-root PATHs often lack sbin, where Debian puts dockerd.
has_dockerd() { command -v dockerd >/dev/null 2>&1 || [[ -x /usr/sbin/dockerd ]]; }

status=0
probe || status=$?
if [[ $status -eq 0 ]]; then
  exit 0
fi
if [[ $status -eq 2 ]]; then
  echo "Docker answers on $socket but $(id -un) may not use it." >&2
  echo "Fix: add the user to the docker group (sudo usermod -aG docker $(id -un)) and log in again." >&2
  exit 1
fi

if [[ "$socket" != /var/run/docker.sock && "$socket" != /run/docker.sock ]]; then
  echo "Docker is not answering on $socket (from DOCKER_HOST)." >&2
  echo "Fix: start that daemon, or unset DOCKER_HOST to use the system one." >&2
  exit 1
fi

if [[ $(id -u) -ne 0 || ! -f /etc/debian_version ]]; then
  if has_dockerd; then
    echo "Docker is installed but not answering on $socket." >&2
    echo "Fix: start it (sudo systemctl start docker, or sudo dockerd), or run the set-up as root." >&2
  else
    echo "Docker is not installed." >&2
    echo "Fix: install Docker Engine (Debian/Ubuntu: sudo apt-get install docker.io) and start it, or run the set-up as root on Debian." >&2
  fi
  exit 1
fi

if ! has_dockerd; then
  apt_install docker.io
fi

if [[ -d /run/systemd/system ]]; then
  # systemd owns dockerd here; a second, unmanaged daemon would fight it for the socket.
  echo "Starting docker with systemctl..."
  log='journalctl -u docker'
  systemctl start docker
elif [[ -f /var/run/docker.pid ]] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  echo "dockerd is running but not answering yet; waiting for it."
else
  echo "Starting dockerd (log: $log)..."
  # setsid + nohup: the daemon leaves this script's session and survives its exit and hangup.
  setsid nohup dockerd >>"$log" 2>&1 </dev/null &
fi

printf 'Waiting for %s ' "$socket"
for _ in $(seq 60); do
  if probe; then
    echo ' ready'
    exit 0
  fi
  printf '.'
  sleep 1
done
echo ' timed out'
if [[ -f "$log" ]]; then
  tail -n 20 "$log" >&2
fi
echo "dockerd did not answer on $socket within 60 s." >&2
echo "Fix: read why in $log (its last lines are above), fix that, and run the set-up again." >&2
exit 1
