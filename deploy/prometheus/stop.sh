#!/usr/bin/env bash
# Stop the Prometheus started by start.sh (SIGTERM, SIGKILL after 15 s) and drop its TSDB.
# Same environment as start.sh (PREFSTREAM_PROMETHEUS_RUN). Safe to call when stopped.
set -euo pipefail
RUN="${PREFSTREAM_PROMETHEUS_RUN:-${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}/prometheus}"
pid="$(cat "$RUN/prometheus.pid" 2>/dev/null || true)"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q prometheus; then
  kill -TERM "$pid"
  t0=$SECONDS
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt 15 ]; do sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  echo "[prometheus] stopped pid $pid" >&2
else
  echo "[prometheus] not running" >&2
fi
rm -f "$RUN/prometheus.pid"
rm -rf "$RUN/tsdb"
