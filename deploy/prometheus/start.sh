#!/usr/bin/env bash
# Start Debian's Prometheus (apt-get install prometheus) on loopback, scraping the prefstream
# workers, with a throw-away TSDB directory. Idempotent; prints the base URL last.
#
# Environment:
#   PREFSTREAM_PROMETHEUS_PORT        listen port on 127.0.0.1 (default 9090)
#   PREFSTREAM_PROMETHEUS_CONFIG      config template (default deploy/prometheus/prometheus.yml)
#   PREFSTREAM_PROMETHEUS_RUN         pid file, log, rendered config and TSDB
#                                     (default ${PREFSTREAM_CACHE:-~/.cache/prefstream}/prometheus)
#   PREFSTREAM_LEARNER_METRICS_PORT   learner worker metrics port (default 9464)
#   PREFSTREAM_EXPLAINER_METRICS_PORT explainer worker metrics port (default 9465)
#   PREFSTREAM_SERVE_PORT             prefstream serve's HTTP port, /metrics scraped (default 8000)
#   PREFSTREAM_PROMETHEUS_TIMEOUT     seconds to wait for /-/ready (default 30)
#   PREFSTREAM_PROMETHEUS_RULES       alert rules copied beside the config (default alerts.yml here)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PORT="${PREFSTREAM_PROMETHEUS_PORT:-9090}"
TEMPLATE="${PREFSTREAM_PROMETHEUS_CONFIG:-$HERE/prometheus.yml}"
RUN="${PREFSTREAM_PROMETHEUS_RUN:-${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}/prometheus}"
TIMEOUT="${PREFSTREAM_PROMETHEUS_TIMEOUT:-30}"
URL="http://127.0.0.1:$PORT"
log() { printf '[prometheus] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; [ -f "$RUN/prometheus.log" ] && tail -n 30 "$RUN/prometheus.log" >&2; exit 1; }

command -v prometheus >/dev/null || die "prometheus not found (Debian: apt-get install -y prometheus)"
mkdir -p "$RUN"
pid="$(cat "$RUN/prometheus.pid" 2>/dev/null || true)"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q prometheus; then
  log "already running (pid $pid) at $URL"; echo "$URL"; exit 0
fi
(exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && die "port $PORT is already taken (set PREFSTREAM_PROMETHEUS_PORT)"

sed -e "s#127\.0\.0\.1:9464#127.0.0.1:${PREFSTREAM_LEARNER_METRICS_PORT:-9464}#" \
    -e "s#127\.0\.0\.1:9465#127.0.0.1:${PREFSTREAM_EXPLAINER_METRICS_PORT:-9465}#" \
    -e "s#127\.0\.0\.1:8000#127.0.0.1:${PREFSTREAM_SERVE_PORT:-8000}#" \
    "$TEMPLATE" > "$RUN/prometheus.yml"
cp "${PREFSTREAM_PROMETHEUS_RULES:-$HERE/alerts.yml}" "$RUN/alerts.yml"
rm -rf "$RUN/tsdb"; mkdir -p "$RUN/tsdb"
setsid nohup prometheus \
    --config.file="$RUN/prometheus.yml" \
    --storage.tsdb.path="$RUN/tsdb" \
    --storage.tsdb.retention.time=1d \
    --web.listen-address="127.0.0.1:$PORT" \
    --web.enable-lifecycle \
    > "$RUN/prometheus.log" 2>&1 < /dev/null &
pid=$!
echo "$pid" > "$RUN/prometheus.pid"
t0=$SECONDS
until curl -fsS "$URL/-/ready" >/dev/null 2>&1; do
  kill -0 "$pid" 2>/dev/null || { rm -f "$RUN/prometheus.pid"; die "prometheus exited during start-up"; }
  [ $((SECONDS - t0)) -lt "$TIMEOUT" ] || { kill "$pid" 2>/dev/null || true; rm -f "$RUN/prometheus.pid"; die "not ready within $TIMEOUT s"; }
  sleep 0.2
done
log "ready at $URL (pid $pid) in $((SECONDS - t0)) s; config $RUN/prometheus.yml"
echo "$URL"
