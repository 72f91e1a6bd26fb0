#!/usr/bin/env bash
# Stop the local broker started by start.sh: SIGTERM (controlled shutdown), wait up to
# PREFSTREAM_KAFKA_STOP_TIMEOUT seconds (default 30), then SIGKILL. Safe to call when stopped.
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# A closed stderr (e.g. piped into `head`) must not abort the shutdown half-way.
trap '' PIPE
log() { printf '[kafka] %s\n' "$*" >&2 2>/dev/null || true; }

mkdir -p "$KAFKA_RUN"
exec 9>"$KAFKA_HOME/lifecycle.lock"
flock -w 300 9 || { log "ERROR: could not take $KAFKA_HOME/lifecycle.lock within 300 s"; exit 1; }

if ! pid="$(kafka_running_pid)"; then
  rm -f "$KAFKA_PID_FILE"
  log "not running"
  exit 0
fi
TIMEOUT="${PREFSTREAM_KAFKA_STOP_TIMEOUT:-30}"
t0=$SECONDS
log "stopping broker pid $pid (SIGTERM, up to $TIMEOUT s)"
kill -TERM "$pid" 2>/dev/null || true
while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$TIMEOUT" ]; do sleep 0.2; done
if kill -0 "$pid" 2>/dev/null; then
  log "still alive after $TIMEOUT s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
fi
rm -f "$KAFKA_PID_FILE"
log "stopped in $((SECONDS - t0)) s"
