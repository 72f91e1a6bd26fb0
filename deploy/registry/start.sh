#!/usr/bin/env bash
# Start the local schema registry (Apicurio Registry, Confluent-compatible API) on 127.0.0.1.
#
#   deploy/registry/start.sh [--timeout SECONDS] [--started-flag FILE]
#
# 1. fetches the ready Quarkus app from Maven Central once (mvn dependency:unpack of
#    io.apicurio:apicurio-registry-app:<version>:tar.gz:all) into $REGISTRY_HOME/app, outside the
#    git tree;
# 2. starts it in the background with in-memory storage (pid file + console log under
#    $REGISTRY_HOME/run) on a Java 21+ (see registry_java in env.sh);
# 3. waits until GET <url>/subjects answers, then sets the global compatibility to BACKWARD
#    (Confluent Schema Registry's default; Apicurio's is NONE).
# Idempotent: if our registry is already running (or a registry already answers on the port) it
# only reports that. On failure it prints the reason and the tail of the log, exit 1. Prints the
# Confluent API URL (what PREFSTREAM_SCHEMA_REGISTRY_URL takes) as its last stdout line. With
# --started-flag FILE, FILE is created only when this call launched the registry.
# Port and paths: env.sh (PREFSTREAM_REGISTRY_PORT, PREFSTREAM_REGISTRY_RUN, PREFSTREAM_CACHE).
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

STARTED_FLAG=""
TIMEOUT="${PREFSTREAM_REGISTRY_START_TIMEOUT:-120}"
while [ $# -gt 0 ]; do
  case "$1" in
    --timeout) TIMEOUT="$2"; shift ;;
    --started-flag) STARTED_FLAG="$2"; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "start.sh: unknown argument '$1' (expected --timeout SECONDS, --started-flag FILE)" >&2; exit 2 ;;
  esac
  shift
done

DIE_LOG_FILE="$REGISTRY_LOG_FILE"   # die (deploy/lib.sh) shows its tail

command -v curl >/dev/null || die "curl not found (Debian: apt-get install -y curl)"
JAVA="$REGISTRY_JAVA"
[ -n "$JAVA" ] || die "no Java 21+ found (Apicurio Registry $REGISTRY_VERSION needs one; Debian 12's default is 17): install one under /usr/lib/jvm or /opt (e.g. Temurin 21 or 25), or set PREFSTREAM_REGISTRY_JAVA"
mkdir -p "$REGISTRY_HOME" "$REGISTRY_RUN"
take_lifecycle_lock "$REGISTRY_HOME/lifecycle.lock"
T_START=$SECONDS

if pid="$(registry_running_pid)"; then
  if registry_answers; then
    log "already running (pid $pid) at $REGISTRY_URL"
    echo "$REGISTRY_URL"; exit 0
  fi
  # e.g. one started on another PREFSTREAM_REGISTRY_PORT with the same run dir, or still starting
  die "the registry of $REGISTRY_PID_FILE (pid $pid) does not answer at $REGISTRY_URL: stop it (deploy/registry/stop.sh with its port), or give this one its own PREFSTREAM_REGISTRY_RUN"
fi
rm -f "$REGISTRY_PID_FILE"
if registry_answers; then
  log "a registry not started by this script already answers at $REGISTRY_URL; using it"
  echo "$REGISTRY_URL"; exit 0
fi
if port_open "$REGISTRY_HOST" "$REGISTRY_PORT"; then
  die "port $REGISTRY_PORT on $REGISTRY_HOST is taken by something that is not a schema registry (set PREFSTREAM_REGISTRY_PORT)"
fi

# ---- 1. the app (once per version) ---------------------------------------------------------
POM_SUM="$(sha256sum "$REGISTRY_DIR/pom.xml" | cut -c1-16)"
if [ "$(cat "$REGISTRY_APP/.complete" 2>/dev/null || true)" != "$POM_SUM-$REGISTRY_VERSION" ]; then
  command -v mvn >/dev/null || die "mvn not found: fetching the registry needs Maven (Debian: apt-get install -y maven)"
  log "fetching Apicurio Registry $REGISTRY_VERSION with Maven into $REGISTRY_APP"
  t0=$SECONDS
  tmp="$REGISTRY_HOME/app.tmp.$$"
  rm -rf "$REGISTRY_HOME"/app.tmp.*   # left over by an interrupted fetch (we hold the lock)
  if ! mvn -q -B -f "$REGISTRY_DIR/pom.xml" -Dregistry.version="$REGISTRY_VERSION" \
        dependency:unpack -DoutputDirectory="$tmp" -DmarkersDirectory="$tmp.markers" >&2; then  # markers: else a second fetch is skipped
    rm -rf "$tmp" "$tmp.markers"; die "mvn dependency:unpack failed (see above)"
  fi
  rm -rf "$tmp.markers"
  [ -f "$tmp/quarkus-run.jar" ] || { rm -rf "$tmp"; die "Maven unpacked no quarkus-run.jar into $tmp"; }
  rm -rf "$REGISTRY_APP"; mv "$tmp" "$REGISTRY_APP"
  echo "$POM_SUM-$REGISTRY_VERSION" > "$REGISTRY_APP/.complete"
  log "app fetched in $((SECONDS - t0)) s"
fi

# ---- 2. start ------------------------------------------------------------------------------
[ -f "$REGISTRY_LOG_FILE" ] && mv -f "$REGISTRY_LOG_FILE" "$REGISTRY_LOG_FILE.1"
log "starting Apicurio Registry $REGISTRY_VERSION at $REGISTRY_URL with $JAVA (log: $REGISTRY_LOG_FILE)"
# in-memory storage is the app's default (apicurio.storage.kind=sql on an in-memory H2)
# shellcheck disable=SC2086
( cd "$REGISTRY_APP" && exec setsid nohup "$JAVA" $REGISTRY_HEAP_OPTS -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dquarkus.http.host="$REGISTRY_HOST" -Dquarkus.http.port="$REGISTRY_PORT" \
    -Dquarkus.management.host="$REGISTRY_HOST" -Dquarkus.management.port="$REGISTRY_MANAGEMENT_PORT" \
    -Dquarkus.log.level=WARN -Dquarkus.http.access-log.enabled=false \
    -jar quarkus-run.jar > "$REGISTRY_LOG_FILE" 2>&1 < /dev/null 9>&- ) &
PID=$!
echo "$PID" > "$REGISTRY_PID_FILE"
[ -n "$STARTED_FLAG" ] && echo "$PID" > "$STARTED_FLAG"

# ---- 3. wait until it answers, then BACKWARD compatibility ---------------------------------
t0=$SECONDS
until registry_answers; do
  if ! kill -0 "$PID" 2>/dev/null; then rm -f "$REGISTRY_PID_FILE"; die "the registry exited during start (pid $PID)"; fi
  if [ $((SECONDS - t0)) -ge "$TIMEOUT" ]; then
    kill -TERM "$PID" 2>/dev/null || true; sleep 2; kill -KILL "$PID" 2>/dev/null || true
    rm -f "$REGISTRY_PID_FILE"
    die "registry did not answer within ${TIMEOUT} s (pid $PID)"
  fi
  sleep 0.5
done
curl -sf -m 5 -X PUT -H 'Content-Type: application/vnd.schemaregistry.v1+json' \
    -d '{"compatibility": "BACKWARD"}' "$REGISTRY_URL/config" >/dev/null \
  || die "could not set the global compatibility to BACKWARD at $REGISTRY_URL/config"
log "ready at $REGISTRY_URL (pid $PID, compatibility BACKWARD) after $((SECONDS - t0)) s waiting, $((SECONDS - T_START)) s in total"
echo "$REGISTRY_URL"
