# Sourced by deploy/kafka/*.sh. Every path here is outside the git tree.
# Override any of these through the environment.
KAFKA_VERSION="${PREFSTREAM_KAFKA_VERSION:-4.4.0}"   # keep in sync with <kafka.version> in pom.xml
PREFSTREAM_CACHE="${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}"
KAFKA_HOME="${PREFSTREAM_KAFKA_HOME:-$PREFSTREAM_CACHE/kafka/$KAFKA_VERSION}"
KAFKA_LIBS="$KAFKA_HOME/libs"                          # jars from `mvn dependency:copy-dependencies`
KAFKA_DATA="${PREFSTREAM_KAFKA_DATA:-$KAFKA_HOME/data}" # log.dirs (topic data + KRaft metadata log)
KAFKA_RUN="${PREFSTREAM_KAFKA_RUN:-$KAFKA_HOME/run}"    # rendered config, pid file, console log
# Optional properties file appended to server.properties (its keys win; @PORT@, @CONTROLLER_PORT@,
# @DATA_DIR@ rendered), e.g. the SSL/SASL_SSL listeners written by tls.sh.
KAFKA_EXTRA_CONFIG="${PREFSTREAM_KAFKA_EXTRA_CONFIG:-}"
# Optional SCRAM users "name:password[,name:password...]" written into the storage at format time
# (SCRAM-SHA-256 and SCRAM-SHA-512 credentials; a data dir formatted before keeps its users).
KAFKA_SCRAM_USERS="${PREFSTREAM_KAFKA_SCRAM_USERS:-}"
KAFKA_PID_FILE="$KAFKA_RUN/kafka.pid"
KAFKA_LOG_FILE="$KAFKA_RUN/kafka.log"
KAFKA_HOST="127.0.0.1"
KAFKA_PORT="${PREFSTREAM_KAFKA_PORT:-9092}"
KAFKA_CONTROLLER_PORT="${PREFSTREAM_KAFKA_CONTROLLER_PORT:-9093}"
KAFKA_BOOTSTRAP="$KAFKA_HOST:$KAFKA_PORT"
KAFKA_HEAP_OPTS="${KAFKA_HEAP_OPTS:--Xms256m -Xmx512m}"
KAFKA_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LOG_TAG=kafka
# shellcheck source=../lib.sh
source "$KAFKA_DIR/../lib.sh"

# pid of the running broker started by start.sh, or nothing
kafka_running_pid() { running_pid "$KAFKA_PID_FILE" 'kafka\.Kafka'; }
