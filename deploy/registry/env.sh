# Sourced by deploy/registry/*.sh. Every path here is outside the git tree.
# Override any of these through the environment.
# A Java of at least major version $1 (default 21; Apicurio Registry 3.1+ needs 21):
# PREFSTREAM_REGISTRY_JAVA, else the first of JAVA_HOME, the JDKs under /usr/lib/jvm and /opt, and
# `java` on PATH whose major version is high enough (Temurin 25 sits beside Debian's Java 17).
registry_java() {
  local cand v need="${1:-21}"
  if [ -n "${PREFSTREAM_REGISTRY_JAVA:-}" ]; then echo "$PREFSTREAM_REGISTRY_JAVA"; return 0; fi
  for cand in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} /usr/lib/jvm/*/bin/java /opt/*/bin/java /opt/java/*/bin/java \
              "$(command -v java 2>/dev/null || true)"; do
    [ -x "$cand" ] || continue
    v="$("$cand" -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java\.specification\.version = //p' | head -n 1)"
    case "$v" in ''|1.*) continue ;; esac
    [ "${v%%.*}" -ge "$need" ] 2>/dev/null && { echo "$cand"; return 0; }
  done
  return 1
}

REGISTRY_VERSION="${PREFSTREAM_REGISTRY_VERSION:-3.3.3}"   # keep in sync with <registry.version> in pom.xml
REGISTRY_JAVA="$(registry_java 21 || true)"
PREFSTREAM_CACHE="${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}"
REGISTRY_HOME="${PREFSTREAM_REGISTRY_HOME:-$PREFSTREAM_CACHE/registry/$REGISTRY_VERSION}"
REGISTRY_APP="$REGISTRY_HOME/app"                             # the unpacked Quarkus app (quarkus-run.jar)
REGISTRY_RUN="${PREFSTREAM_REGISTRY_RUN:-$REGISTRY_HOME/run}" # pid file, console log
REGISTRY_PID_FILE="$REGISTRY_RUN/registry.pid"
REGISTRY_LOG_FILE="$REGISTRY_RUN/registry.log"
REGISTRY_HOST="127.0.0.1"
REGISTRY_PORT="${PREFSTREAM_REGISTRY_PORT:-8081}"
REGISTRY_URL="http://$REGISTRY_HOST:$REGISTRY_PORT/apis/ccompat/v7"   # the Confluent-compatible API
# Quarkus's management interface (health, metrics) binds 0.0.0.0:9000 by default, so a second
# registry on another PREFSTREAM_REGISTRY_PORT failed to start ("Address already in use"): it gets
# its own port on 127.0.0.1, 1000 above the API's unless PREFSTREAM_REGISTRY_MANAGEMENT_PORT is set
REGISTRY_MANAGEMENT_PORT="${PREFSTREAM_REGISTRY_MANAGEMENT_PORT:-$((REGISTRY_PORT + 1000))}"
REGISTRY_HEAP_OPTS="${REGISTRY_HEAP_OPTS:--Xms64m -Xmx384m}"
REGISTRY_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=registry
# shellcheck source=../lib.sh
source "$REGISTRY_DIR/../lib.sh"

# pid of the running registry started by start.sh, or nothing
registry_running_pid() { running_pid "$REGISTRY_PID_FILE" 'quarkus-run\.jar'; }

# true when the Confluent-compatible API answers at $REGISTRY_URL
registry_answers() {
  curl -sf -m 2 "$REGISTRY_URL/subjects" >/dev/null 2>&1
}
