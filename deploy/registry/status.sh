#!/usr/bin/env bash
# Report the local schema registry's state. Exit 0 when running (our pid is alive and the
# Confluent API answers), 3 when stopped. `--json` prints one JSON object instead of text.
set -uo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

pid="$(registry_running_pid || true)"
answers=false; registry_answers && answers=true
running=false; [ -n "$pid" ] && [ "$answers" = true ] && running=true
fetched=false; [ -f "$REGISTRY_APP/.complete" ] && fetched=true
compat="$(curl -sf -m 2 "$REGISTRY_URL/config" 2>/dev/null | sed -n 's/.*"compatibilityLevel" *: *"\([A-Z_]*\)".*/\1/p')"

if [ "${1:-}" = "--json" ]; then
  printf '{"running": %s, "pid": %s, "answers": %s, "url": "%s", "version": "%s", "app": "%s", "fetched": %s, "compatibility": "%s", "log_file": "%s"}\n' \
    "$running" "${pid:-null}" "$answers" "$REGISTRY_URL" "$REGISTRY_VERSION" "$REGISTRY_APP" "$fetched" \
    "${compat:-}" "$REGISTRY_LOG_FILE"
else
  echo "registry:      $([ "$running" = true ] && echo "running (pid $pid)" || echo stopped)"
  echo "url:           $REGISTRY_URL (answers: $answers)"
  echo "version:       Apicurio Registry $REGISTRY_VERSION (fetched: $fetched, in $REGISTRY_APP)"
  echo "compatibility: ${compat:-unknown}"
  echo "log:           $REGISTRY_LOG_FILE"
fi
[ "$running" = true ] && exit 0 || exit 3
