#!/usr/bin/env bash
# Stop the local broker started by start.sh: SIGTERM (controlled shutdown), wait up to
# PREFSTREAM_KAFKA_STOP_TIMEOUT seconds (default 30), then SIGKILL. Safe to call when stopped.
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
# A closed stderr (e.g. piped into `head`) must not abort the shutdown half-way.
trap '' PIPE

mkdir -p "$KAFKA_RUN"
take_lifecycle_lock "$KAFKA_HOME/lifecycle.lock"
stop_service broker kafka_running_pid "$KAFKA_PID_FILE" "${PREFSTREAM_KAFKA_STOP_TIMEOUT:-30}"
