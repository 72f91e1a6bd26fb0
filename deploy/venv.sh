#!/usr/bin/env bash
# Cached virtualenv for prefstream, shared by `make` and .ci/run.
#
#   deploy/venv.sh            print the venv path (cheap; creates nothing)
#   deploy/venv.sh --ensure   create/reuse it, install the repo editable, print the path (last line)
#
# The venv lives OUTSIDE the clone, keyed on requirements.txt:
#   ${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}/venv-<first 16 hex of sha256(requirements.txt)>
# A marker file (.prefstream-ready) is written only after `pip install -r requirements.txt`
# succeeded, so an interrupted build is thrown away and rebuilt on the next call.
# `pip install -e . --no-deps` is redone whenever the clone path or pyproject.toml changed
# (CI clones into a new folder each time), so the `prefstream` script imports this checkout.
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}"
REQ="$REPO/requirements.txt"
HASH="$(sha256sum "$REQ" | cut -c1-16)"
VENV="$CACHE/venv-$HASH"
READY="$VENV/.prefstream-ready"

log() { printf '[venv] %s\n' "$*" >&2; }

find_python311() {
  local c
  # needs venv *and* ensurepip (Debian ships the latter separately, in python3.11-venv)
  for c in "${PREFSTREAM_PYTHON:-}" python3.11 "$HOME"/.pyenv/versions/3.11*/bin/python3.11 \
           /usr/local/bin/python3.11 /usr/bin/python3.11; do
    [ -n "$c" ] || continue
    if command -v "$c" >/dev/null 2>&1 \
       && "$c" -c 'import sys, venv, ensurepip; assert sys.version_info[:2] == (3, 11)' 2>/dev/null; then
      command -v "$c"; return 0
    fi
  done
  return 1
}

if [ "${1:-}" != "--ensure" ]; then
  echo "$VENV"
  exit 0
fi

mkdir -p "$CACHE"
# One builder at a time (several shells / CI may call this concurrently).
exec 9>"$CACHE/venv.lock"
flock 9

if [ ! -f "$READY" ]; then
  t0=$SECONDS
  PY311="$(find_python311)" || {
    log "ERROR: Python 3.11 with the venv module is needed (pyproject: requires-python >=3.11,<3.12)."
    log "       Install it (Debian: apt-get install -y python3.11 python3.11-venv) or set PREFSTREAM_PYTHON=/path/to/python3.11."
    exit 1
  }
  log "building $VENV with $PY311 (requirements.txt sha256 prefix $HASH)"
  rm -rf "$VENV"
  if ! "$PY311" -m venv "$VENV" >&2; then
    log "ERROR: '$PY311 -m venv' failed; on Debian install python3.11-venv (apt-get install -y python3.11-venv)."
    rm -rf "$VENV"; exit 1
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2
  if ! "$VENV/bin/python" -m pip install -q -r "$REQ" >&2; then
    log "ERROR: pip install -r $REQ failed (see above); the half-built venv is left without its marker and will be rebuilt."
    exit 1
  fi
  date -u +%FT%TZ > "$READY"
  log "venv built in $((SECONDS - t0)) s"
else
  log "reusing $VENV"
fi

# Editable install of this checkout, redone when the clone path or pyproject.toml changed.
EDIT_KEY="$(printf '%s\n' "$REPO" | cat - "$REPO/pyproject.toml" | sha256sum | cut -c1-16)"
EDIT_MARK="$VENV/.editable-$EDIT_KEY"
if [ ! -f "$EDIT_MARK" ]; then
  t0=$SECONDS
  if ! "$VENV/bin/python" -m pip install -q --no-deps -e "$REPO" > "$VENV/.editable.log" 2>&1; then
    cat "$VENV/.editable.log" >&2
    log "ERROR: pip install -e $REPO failed (see above)"
    exit 1
  fi
  rm -f "$VENV"/.editable-*
  touch "$EDIT_MARK"
  log "editable install of $REPO in $((SECONDS - t0)) s"
fi
echo "$VENV"
