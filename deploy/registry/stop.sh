#!/usr/bin/env bash
# Stop the local schema registry started by start.sh: SIGTERM, wait up to
# PREFSTREAM_REGISTRY_STOP_TIMEOUT seconds (default 20), then SIGKILL. Safe to call when stopped.
# Its storage is in memory: every schema registered is gone afterwards.
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
trap '' PIPE
log() { printf '[registry] %s\n' "$*" >&2 2>/dev/null || true; }

mkdir -p "$REGISTRY_HOME" "$REGISTRY_RUN"
exec 9>"$REGISTRY_HOME/lifecycle.lock"
flock -w 300 9 || { log "ERROR: could not take $REGISTRY_HOME/lifecycle.lock within 300 s"; exit 1; }

if ! pid="$(registry_running_pid)"; then
  rm -f "$REGISTRY_PID_FILE"
  log "not running"
  exit 0
fi
TIMEOUT="${PREFSTREAM_REGISTRY_STOP_TIMEOUT:-20}"
t0=$SECONDS
log "stopping registry pid $pid (SIGTERM, up to $TIMEOUT s)"
kill -TERM "$pid" 2>/dev/null || true
while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$TIMEOUT" ]; do sleep 0.2; done
if kill -0 "$pid" 2>/dev/null; then
  log "still alive after $TIMEOUT s: SIGKILL"
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
fi
rm -f "$REGISTRY_PID_FILE"
log "stopped in $((SECONDS - t0)) s"
