#!/usr/bin/env bash
# Start the local single-node Apache Kafka broker (KRaft) on 127.0.0.1.
#
#   deploy/kafka/start.sh [--fresh] [--timeout SECONDS] [--started-flag FILE]
#
# 1. resolves the broker jars from Maven Central once (mvn dependency:copy-dependencies) into
#    $KAFKA_HOME/libs, outside the git tree;
# 2. formats the storage directory once (kafka.tools.StorageTool format), or afresh with --fresh;
# 3. starts kafka.Kafka in the background (pid file + console log under $KAFKA_HOME/run);
# 4. waits until the broker answers an AdminClient describeCluster/listTopics (ReadyProbe.java).
# Idempotent: if our broker is already running (or any broker already answers on the port) it
# only reports that. On failure it prints the reason and the tail of the broker log, exit 1.
# Paths and ports: see env.sh (PREFSTREAM_CACHE, PREFSTREAM_KAFKA_PORT, ...). Prints the
# bootstrap address as its last stdout line. With --started-flag FILE, FILE is created only when
# this call launched the broker (callers that must stop what they started, e.g. with-broker.sh).
# A second broker beside the default one needs its own PREFSTREAM_KAFKA_PORT,
# PREFSTREAM_KAFKA_CONTROLLER_PORT, PREFSTREAM_KAFKA_DATA and PREFSTREAM_KAFKA_RUN (pid file and
# log); PREFSTREAM_KAFKA_EXTRA_CONFIG adds listeners (e.g. SSL and SASL_SSL from tls.sh) and
# PREFSTREAM_KAFKA_SCRAM_USERS writes SCRAM users at format time (docs/kafka.md, "TLS").
set -euo pipefail
# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

FRESH=0
STARTED_FLAG=""
TIMEOUT="${PREFSTREAM_KAFKA_START_TIMEOUT:-120}"
while [ $# -gt 0 ]; do
  case "$1" in
    --fresh) FRESH=1 ;;
    --timeout) TIMEOUT="$2"; shift ;;
    --started-flag) STARTED_FLAG="$2"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "start.sh: unknown argument '$1' (expected --fresh, --timeout SECONDS, --started-flag FILE)" >&2; exit 2 ;;
  esac
  shift
done

DIE_LOG_FILE="$KAFKA_LOG_FILE"   # die (deploy/lib.sh) shows its tail

command -v java >/dev/null || die "java not found: the broker needs Java 17+ (Debian: apt-get install -y openjdk-17-jre-headless)"
mkdir -p "$KAFKA_RUN"
take_lifecycle_lock "$KAFKA_HOME/lifecycle.lock"
T_START=$SECONDS

if pid="$(kafka_running_pid)"; then
  log "already running (pid $pid) at $KAFKA_BOOTSTRAP"
  echo "$KAFKA_BOOTSTRAP"; exit 0
fi
rm -f "$KAFKA_PID_FILE"

# ---- 1. jars (once per version) ------------------------------------------------------------
POM_SUM="$(sha256sum "$KAFKA_DIR/pom.xml" | cut -c1-16)"
if [ "$(cat "$KAFKA_LIBS/.complete" 2>/dev/null || true)" != "$POM_SUM" ]; then
  command -v mvn >/dev/null || die "mvn not found: resolving the broker jars needs Maven (Debian: apt-get install -y maven)"
  log "resolving Apache Kafka $KAFKA_VERSION jars with Maven into $KAFKA_LIBS"
  t0=$SECONDS
  tmp="$KAFKA_HOME/libs.tmp.$$"
  rm -rf "$KAFKA_HOME"/libs.tmp.*   # left over by an interrupted resolution (we hold the lock)
  if ! mvn -q -B -f "$KAFKA_DIR/pom.xml" -Dkafka.version="$KAFKA_VERSION" \
        dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$tmp" >&2; then
    rm -rf "$tmp"; die "mvn dependency:copy-dependencies failed (see above)"
  fi
  ls "$tmp"/kafka_2.13-*.jar >/dev/null 2>&1 || { rm -rf "$tmp"; die "Maven produced no kafka_2.13 jar in $tmp"; }
  rm -rf "$KAFKA_LIBS"; mv "$tmp" "$KAFKA_LIBS"
  echo "$POM_SUM" > "$KAFKA_LIBS/.complete"
  log "jars resolved in $((SECONDS - t0)) s ($(ls "$KAFKA_LIBS" | wc -l) files)"
fi
CP="$KAFKA_LIBS/*"

# ---- 2. config + storage format (once) -----------------------------------------------------
if port_open "$KAFKA_HOST" "$KAFKA_PORT"; then
  # Not ours (no live pid file) but something listens: accept it only if it is a Kafka broker.
  if java -cp "$CP" "$KAFKA_DIR/ReadyProbe.java" "$KAFKA_BOOTSTRAP" 10 >&2; then
    log "a broker not started by this script already answers at $KAFKA_BOOTSTRAP; using it"
    echo "$KAFKA_BOOTSTRAP"; exit 0
  fi
  log "ERROR: port $KAFKA_PORT on $KAFKA_HOST is taken by something that is not a Kafka broker (set PREFSTREAM_KAFKA_PORT)"
  exit 1
fi

CONF="$KAFKA_RUN/server.properties"
CONF_SOURCES=("$KAFKA_DIR/server.properties")
if [ -n "$KAFKA_EXTRA_CONFIG" ]; then
  [ -f "$KAFKA_EXTRA_CONFIG" ] || die "PREFSTREAM_KAFKA_EXTRA_CONFIG=$KAFKA_EXTRA_CONFIG is not a file"
  CONF_SOURCES+=("$KAFKA_EXTRA_CONFIG")   # appended: a key set twice takes the later value
  log "extra broker config: $KAFKA_EXTRA_CONFIG"
fi
cat "${CONF_SOURCES[@]}" | sed -e "s#@PORT@#$KAFKA_PORT#g" -e "s#@CONTROLLER_PORT@#$KAFKA_CONTROLLER_PORT#g" \
    -e "s#@DATA_DIR@#$KAFKA_DATA#g" > "$CONF"
chmod 600 "$CONF"   # may hold key-store and SASL passwords
FORMAT_ARGS=()
if [ -n "$KAFKA_SCRAM_USERS" ]; then
  IFS=',' read -r -a scram_users <<<"$KAFKA_SCRAM_USERS"
  for u in "${scram_users[@]}"; do
    case "$u" in *:*) ;; *) die "PREFSTREAM_KAFKA_SCRAM_USERS: '$u' is not name:password" ;; esac
    for mech in SCRAM-SHA-256 SCRAM-SHA-512; do
      FORMAT_ARGS+=(--add-scram "$mech=[name=${u%%:*},password=${u#*:}]")
    done
  done
fi

if [ "$FRESH" = 1 ]; then
  log "--fresh: wiping $KAFKA_DATA"
  rm -rf "$KAFKA_DATA"
fi
if [ ! -f "$KAFKA_DATA/meta.properties" ]; then
  t0=$SECONDS
  rm -rf "$KAFKA_DATA"; mkdir -p "$KAFKA_DATA"
  # Kafka cluster ids are 16 random bytes, URL-safe base64 without padding (must not start with '-').
  while :; do
    CLUSTER_ID="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    [ "${CLUSTER_ID#-}" = "$CLUSTER_ID" ] && break
  done
  log "formatting $KAFKA_DATA (cluster id $CLUSTER_ID)"
  java -Xmx256m -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" -cp "$CP" \
      kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$CONF" ${FORMAT_ARGS[@]+"${FORMAT_ARGS[@]}"} > "$KAFKA_RUN/format.log" 2>&1 \
    || { tail -n 40 "$KAFKA_RUN/format.log" >&2; rm -rf "$KAFKA_DATA"; die "kafka.tools.StorageTool format failed (full output: $KAFKA_RUN/format.log)"; }
  log "formatted in $((SECONDS - t0)) s"
fi

# ---- 3. start ------------------------------------------------------------------------------
[ -f "$KAFKA_LOG_FILE" ] && mv -f "$KAFKA_LOG_FILE" "$KAFKA_LOG_FILE.1"
log "starting kafka.Kafka $KAFKA_VERSION at $KAFKA_BOOTSTRAP (log: $KAFKA_LOG_FILE)"
# shellcheck disable=SC2086
setsid nohup java $KAFKA_HEAP_OPTS -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
    -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true \
    -Dlog4j2.configurationFile="$KAFKA_DIR/log4j2.properties" \
    -cp "$CP" kafka.Kafka "$CONF" > "$KAFKA_LOG_FILE" 2>&1 < /dev/null 9>&- &
PID=$!
echo "$PID" > "$KAFKA_PID_FILE"
[ -n "$STARTED_FLAG" ] && echo "$PID" > "$STARTED_FLAG"

# ---- 4. wait until it answers --------------------------------------------------------------
t0=$SECONDS
if ! java -cp "$CP" "$KAFKA_DIR/ReadyProbe.java" "$KAFKA_BOOTSTRAP" "$TIMEOUT" "$PID" >&2; then
  if kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID" 2>/dev/null || true; sleep 3; kill -KILL "$PID" 2>/dev/null || true
  fi
  rm -f "$KAFKA_PID_FILE"
  die "broker did not become ready within ${TIMEOUT} s (pid $PID)"
fi
log "ready at $KAFKA_BOOTSTRAP (pid $PID) after $((SECONDS - t0)) s waiting, $((SECONDS - T_START)) s in total"
echo "$KAFKA_BOOTSTRAP"
