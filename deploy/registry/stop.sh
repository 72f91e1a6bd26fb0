#!/usr/bin/env bash
# Stop the local schema registry started by start.sh: SIGTERM, wait up to
# PREFSTREAM_REGISTRY_STOP_TIMEOUT seconds (default 20), then SIGKILL. Safe to call when stopped.
# Its storage is in memory: every schema registered is gone afterwards.
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
trap '' PIPE

mkdir -p "$REGISTRY_HOME" "$REGISTRY_RUN"
take_lifecycle_lock "$REGISTRY_HOME/lifecycle.lock"
stop_service registry registry_running_pid "$REGISTRY_PID_FILE" "${PREFSTREAM_REGISTRY_STOP_TIMEOUT:-20}"
