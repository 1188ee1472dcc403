# Named set-up steps: `step NAME FIX CMD [ARG...]` runs CMD with its output in a log file,
# prints the step's name when it starts and its time when it ends, shows progress (the
# log's last line and the time so far) while it runs longer than a few seconds, and on a
# failure prints the step, its exit code, the log's last lines and `Fix: FIX`, then exits 1.
#
# Invariants: no step ends silently, successful or not. Logs go to $BERTH_SETUP_LOGS
# (default .berth-setup/ in the checkout), one file per step, overwritten on each run.
# With BERTH_SETUP_DRY_RUN=1 a step prints its name and command and runs nothing.
# Sourced, never run; needs bash 4.

: "${BERTH_SETUP_LOGS:=$(pwd)/.berth-setup}"
export BERTH_SETUP_LOGS
mkdir -p "$BERTH_SETUP_LOGS"

_steps_now_ms() { date +%s%3N; }

# 1234 -> "1.2 s", 75000 -> "1 min 15 s"
_steps_duration() {
  local ms=$1
  if ((ms < 60000)); then
    printf '%d.%d s' $((ms / 1000)) $((ms % 1000 / 100))
  else
    printf '%d min %d s' $((ms / 60000)) $((ms % 60000 / 1000))
  fi
}

_steps_last_line() {
  # The last non-empty line, without carriage-return redraws, cut to 100 characters.
  # (grep finds nothing in an empty log: not an error under pipefail.)
  { tr '\r' '\n' <"$1" | grep -v -e '^[[:space:]]*$' -e '^npm warn EBADENGINE' || true; } | tail -n 1 | cut -c1-100
}

step() {
  local name=$1 fix=$2
  shift 2
  local slug log started rc=0 pid elapsed last tty=0 next_note_s=5
  slug=$(printf '%s' "$name" | tr -cs 'A-Za-z0-9' '-' | sed 's/^-//; s/-$//')
  log=$BERTH_SETUP_LOGS/$slug.log
  [[ -t 1 ]] && tty=1
  printf '==> %s\n' "$name"
  if [[ ${BERTH_SETUP_DRY_RUN:-0} == 1 ]]; then
    printf 'dry-run: %s\n' "$*"
    return 0
  fi
  started=$(_steps_now_ms)
  "$@" >"$log" 2>&1 </dev/null &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    sleep 0.2
    elapsed=$((($(_steps_now_ms) - started) / 1000))
    if ((elapsed >= next_note_s)) && kill -0 "$pid" 2>/dev/null; then
      last=$(_steps_last_line "$log")
      if ((tty)); then
        printf '\r\033[K    %d s %s' "$elapsed" "$last"
        next_note_s=$((elapsed + 1))
      else
        printf '    %d s %s\n' "$elapsed" "$last"
        next_note_s=$((elapsed + 15))
      fi
    fi
  done
  wait "$pid" || rc=$?
  ((tty)) && printf '\r\033[K'
  elapsed=$(($(_steps_now_ms) - started))
  if ((rc != 0)); then
    {
      printf 'setup: step "%s" failed after %s (exit code %d). Its last lines (whole log: %s):\n' \
        "$name" "$(_steps_duration "$elapsed")" "$rc" "$log"
      tail -n 20 "$log" | sed 's/^/    /'
      printf 'Fix: %s\n' "$fix"
    } >&2
    exit 1
  fi
  printf '    %s: done in %s\n' "$name" "$(_steps_duration "$elapsed")"
}
