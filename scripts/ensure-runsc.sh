#!/usr/bin/env bash
# gVisor tier: installs Debian's runsc when the package is available and
# registers it as the Docker runtime "runsc" (--platform=ptrace --network=none
# --host-uds=open: the sandbox must connect to its gateway socket, a host Unix socket).
#
# Invariants: idempotent and additive. /etc/docker/daemon.json is merged, never replaced:
# only the "runtimes.runsc" entry is set, everything else is kept; it is written (and the
# daemon told with SIGHUP, which reloads runtimes) only when that entry changes. dockerd is
# never restarted: other users share it. Not root, not Debian, or no runsc package: says so
# in one line and exits 0 — the gVisor tier is optional, its tests skip without it — unless
# BERTH_REQUIRE_ALL_SUITES=1 (CI: every suite must run), where it exits 1 instead.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

daemon_json=/etc/docker/daemon.json
say() { printf 'ensure-runsc: %s\n' "$*"; }
# The tier cannot be had here: optional, unless every suite must run.
unavailable() {
  if [[ ${BERTH_REQUIRE_ALL_SUITES:-0} == 1 ]]; then
    say "$1; BERTH_REQUIRE_ALL_SUITES=1 needs the gVisor tier: run as root on Debian with the runsc package"
    exit 1
  fi
  say "$1: the gVisor tier is unavailable (its tests skip)"
  exit 0
}

if [[ $(id -u) -ne 0 ]]; then
  unavailable "not root (the gVisor tier needs runsc registered in $daemon_json)"
fi
if ! command -v runsc >/dev/null 2>&1; then
  if [[ ! -f /etc/debian_version ]] || ! apt_install runsc; then
    unavailable "no runsc package on this machine"
  fi
fi

runsc_path=$(command -v runsc)
changed=$(node -e '
  const fs = require("node:fs");
  const [file, path] = process.argv.slice(1);
  let config = {};
  try { config = JSON.parse(fs.readFileSync(file, "utf8")); } catch (err) { if (err.code !== "ENOENT") throw err; }
  const wanted = { path, runtimeArgs: ["--platform=ptrace", "--network=none", "--host-uds=open"] };
  if (JSON.stringify(config.runtimes?.runsc) === JSON.stringify(wanted)) { console.log("no"); process.exit(0); }
  config.runtimes = { ...(config.runtimes ?? {}), runsc: wanted };
  fs.mkdirSync(require("node:path").dirname(file), { recursive: true });
  fs.writeFileSync(file + ".berth-tmp", JSON.stringify(config, null, 2) + "\n");
  fs.renameSync(file + ".berth-tmp", file);
  console.log("yes");
' "$daemon_json" "$runsc_path")

if [[ "$changed" == yes ]]; then
  pid=$(pidof dockerd || true)
  if [[ -z "$pid" ]]; then
    say "registered runsc in $daemon_json; dockerd is not running, it will load it at start"
    exit 0
  fi
  kill -HUP $pid
  say "registered runsc in $daemon_json and reloaded dockerd (SIGHUP)"
fi

# The reload is asynchronous: wait until the engine lists the runtime.
for _ in $(seq 1 50); do
  if node -e '
    require("node:http").get({ socketPath: "/var/run/docker.sock", path: "/info" }, (res) => {
      let t = ""; res.on("data", (c) => (t += c));
      res.on("end", () => process.exit(JSON.parse(t).Runtimes?.runsc ? 0 : 1));
    }).on("error", () => process.exit(1));
  '; then
    exit 0
  fi
  sleep 0.1
done
say "dockerd does not list the runsc runtime after the reload; see its log"
exit 1
