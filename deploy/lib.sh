# Sourced by deploy/kafka/env.sh and deploy/registry/env.sh: what the start, stop and status
# scripts of the local services share. The sourcing env.sh sets LOG_TAG (every message reads
# "[LOG_TAG] ..."); a script whose errors should show the tail of a log sets DIE_LOG_FILE.
DIE_LOG_FILE=""

# One message on stderr. Never fails: a closed stderr (e.g. piped into `head`) must not abort a
# stop half-way.
log() { printf '[%s] %s\n' "$LOG_TAG" "$*" >&2 2>/dev/null || true; }

# "ERROR: <message>", then the last 40 lines of $DIE_LOG_FILE when it exists; exit 1.
die() {
  log "ERROR: $*"
  if [ -n "${DIE_LOG_FILE:-}" ] && [ -f "$DIE_LOG_FILE" ]; then
    log "last 40 lines of $DIE_LOG_FILE:"
    tail -n 40 "$DIE_LOG_FILE" >&2 || true
  fi
  exit 1
}

# true when something accepts TCP connections on host:port ($1, $2)
port_open() {
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

# The pid in pid file $1 when that process is alive and its command line matches the grep
# pattern $2 (so a pid reused by another program is not ours); else nothing, status 1.
running_pid() {
  local pid
  [ -f "$1" ] || return 1
  pid="$(cat "$1" 2>/dev/null || true)"
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q "$2" || return 1
  echo "$pid"
}

# Hold the lock file $1 on fd 9 for the rest of the script (concurrent starts and stops from
# several shells, make and CI serialise on it), or die after 300 s.
take_lifecycle_lock() {
  exec 9>"$1"
  flock -w 300 9 || die "could not take $1 within 300 s"
}

# Stop the service whose pid the function $2 prints ($1 names it in the messages, $3 is its pid
# file): SIGTERM, wait up to $4 seconds, then SIGKILL and wait until it is gone; the pid file is
# removed. "not running" (status 0) when $2 finds nothing.
stop_service() {
  local what="$1" pid_of="$2" pid_file="$3" timeout="$4" pid t0
  if ! pid="$("$pid_of")"; then
    rm -f "$pid_file"
    log "not running"
    return 0
  fi
  t0=$SECONDS
  log "stopping $what pid $pid (SIGTERM, up to $timeout s)"
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - t0)) -lt "$timeout" ]; do sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then
    log "still alive after $timeout s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$pid_file"
  log "stopped in $((SECONDS - t0)) s"
}
