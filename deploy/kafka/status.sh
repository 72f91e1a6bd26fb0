#!/usr/bin/env bash
# Report the local broker's state. Exit 0 when running (our pid is alive and the port accepts
# connections), 3 when stopped. `--json` prints one JSON object instead of text.
set -uo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

pid="$(kafka_running_pid || true)"
port_open=false; port_open "$KAFKA_HOST" "$KAFKA_PORT" && port_open=true
running=false; [ -n "$pid" ] && [ "$port_open" = true ] && running=true
jars=false; [ -f "$KAFKA_LIBS/.complete" ] && jars=true
formatted=false; [ -f "$KAFKA_DATA/meta.properties" ] && formatted=true

if [ "${1:-}" = "--json" ]; then
  printf '{"running": %s, "pid": %s, "port_open": %s, "bootstrap": "%s", "version": "%s", "home": "%s", "libs": "%s", "jars_resolved": %s, "data_dir": "%s", "formatted": %s, "log_file": "%s"}\n' \
    "$running" "${pid:-null}" "$port_open" "$KAFKA_BOOTSTRAP" "$KAFKA_VERSION" "$KAFKA_HOME" "$KAFKA_LIBS" \
    "$jars" "$KAFKA_DATA" "$formatted" "$KAFKA_LOG_FILE"
else
  echo "broker:    $([ "$running" = true ] && echo "running (pid $pid)" || echo stopped)"
  echo "bootstrap: $KAFKA_BOOTSTRAP (port open: $port_open)"
  echo "version:   Apache Kafka $KAFKA_VERSION (jars resolved: $jars, in $KAFKA_LIBS)"
  echo "data:      $KAFKA_DATA (formatted: $formatted)"
  echo "log:       $KAFKA_LOG_FILE"
fi
[ "$running" = true ] && exit 0 || exit 3
