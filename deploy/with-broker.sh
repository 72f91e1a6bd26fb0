#!/usr/bin/env bash
# Run a command with the local Kafka broker up, and leave the broker as it was found:
#
#   deploy/with-broker.sh CMD [ARGS...]
#
# If the broker is not running it is started (deploy/kafka/start.sh) and stopped again when
# CMD exits (also on failure or Ctrl-C). If PREFSTREAM_BOOTSTRAP names another cluster, no
# local broker is touched. Exits with CMD's status.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[ $# -gt 0 ] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }

STARTED=0
if [ -n "${PREFSTREAM_BOOTSTRAP:-}" ] && [ "${PREFSTREAM_BOOTSTRAP}" != "127.0.0.1:${PREFSTREAM_KAFKA_PORT:-9092}" ]; then
  echo "[with-broker] using PREFSTREAM_BOOTSTRAP=$PREFSTREAM_BOOTSTRAP; local broker untouched" >&2
elif "$HERE/kafka/status.sh" >/dev/null 2>&1; then
  echo "[with-broker] local broker already running; leaving it running" >&2
else
  FLAG="$(mktemp)"; rm -f "$FLAG"
  "$HERE/kafka/start.sh" --started-flag "$FLAG" >/dev/null
  # Only stop what this call launched (someone else may have started it meanwhile).
  if [ -f "$FLAG" ]; then STARTED=1; rm -f "$FLAG"; fi
fi
cleanup() { if [ "$STARTED" = 1 ]; then "$HERE/kafka/stop.sh" || true; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
trap 'exit 141' PIPE

set +e
"$@"
rc=$?
set -e
exit "$rc"
