#!/usr/bin/env bash
# Virtualenvs for prefstream, used by `make` and .ci/run: one cached DEPENDENCY venv shared by
# every clone, and one thin venv per clone that puts this checkout over it.
#
#   deploy/venv.sh            print this clone's venv path, <clone>/.prefstream-venv (cheap; creates nothing)
#   deploy/venv.sh --deps     print the shared dependency venv's path (cheap; creates nothing)
#   deploy/venv.sh --ensure   create/reuse both, print this clone's venv path (last line)
#
# The dependency venv lives OUTSIDE the clone, keyed on requirements.txt:
#   ${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}/venv-<first 16 hex of sha256(requirements.txt)>
# A marker file (.prefstream-ready) is written only after `pip install -r requirements.txt`
# succeeded, so an interrupted build is thrown away and rebuilt on the next call. Once ready it is
# only read: nothing of any clone is installed into it.
#
# The clone venv (<clone>/.prefstream-venv, gitignored) is made by `python -m venv --without-pip`
# from the dependency venv's interpreter and holds only
#   * _prefstream_deps.pth: the dependency venv's site-packages on sys.path, with its .pth files
#     except any prefstream editable install an older deploy/venv.sh left there;
#   * an editable install of THIS checkout (`pip install -e . --no-deps`): its own `prefstream`
#     script and metadata, importing this clone's stream/learners/explainers.
# So two clones sharing one dependency venv each run their own code: tests, workers
# (`sys.executable -m stream ...`) and the `prefstream` command. It is rebuilt (a few seconds)
# when the dependency venv, the clone's path or pyproject.toml changed.
# Progress goes to stderr; stdout carries only the path.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${PREFSTREAM_CACHE:-$HOME/.cache/prefstream}"
REQ="$REPO/requirements.txt"
HASH="$(sha256sum "$REQ" | cut -c1-16)"
VENV="$CACHE/venv-$HASH"
READY="$VENV/.prefstream-ready"
CLONE_VENV="$REPO/.prefstream-venv"

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

case "${1:-}" in
  "") echo "$CLONE_VENV"; exit 0 ;;
  --deps) echo "$VENV"; exit 0 ;;
  --ensure) ;;
  *) echo "venv.sh: unknown argument '$1' (expected nothing, --deps or --ensure)" >&2; exit 2 ;;
esac

# ---- the shared dependency venv ---------------------------------------------------------------
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
flock -u 9

# ---- this clone's venv over it ----------------------------------------------------------------
# One builder per clone (make and CI may race); the lock is the clone's deploy/ folder itself.
exec 8<"$REPO/deploy"
flock 8
KEY="$( { printf '%s\n' "$VENV" "$REPO"; cat "$READY" "$REPO/pyproject.toml"; } | sha256sum | cut -c1-16)"
MARK="$CLONE_VENV/.prefstream-layer"
if [ "$(cat "$MARK" 2>/dev/null || true)" != "$KEY" ]; then
  t0=$SECONDS
  rm -rf "$CLONE_VENV"
  if ! "$VENV/bin/python" -m venv --without-pip "$CLONE_VENV" >&2; then
    rm -rf "$CLONE_VENV"; log "ERROR: '$VENV/bin/python -m venv --without-pip $CLONE_VENV' failed"; exit 1
  fi
  "$VENV/bin/python" - "$CLONE_VENV" <<'EOF'
import pathlib, subprocess, sys, sysconfig
clone_venv = pathlib.Path(sys.argv[1])
deps = sysconfig.get_path("purelib")  # the dependency venv's site-packages (this interpreter's)
site_dir = pathlib.Path(subprocess.check_output(
    [str(clone_venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
    text=True).strip())
(site_dir / "_prefstream_deps.py").write_text(f'''"""Written by deploy/venv.sh: the shared dependency venv behind this clone's venv."""
import os
import site
import sys

DEPS = {deps!r}
if DEPS not in sys.path:
    sys.path.append(DEPS)
    _known = set(sys.path)
    for _name in sorted(os.listdir(DEPS)):  # its .pth files, never a prefstream editable install
        if _name.endswith(".pth") and "prefstream" not in _name:
            site.addpackage(DEPS, _name, _known)
''')
(site_dir / "_prefstream_deps.pth").write_text("import _prefstream_deps\n")
EOF
  if ! (cd / && "$CLONE_VENV/bin/python" -m pip install -q --no-deps --no-build-isolation --no-index \
          -e "$REPO") > "$CLONE_VENV/.editable.log" 2>&1; then
    cat "$CLONE_VENV/.editable.log" >&2
    rm -rf "$CLONE_VENV"
    log "ERROR: pip install -e $REPO into $CLONE_VENV failed (see above)"
    exit 1
  fi
  got="$(cd / && "$CLONE_VENV/bin/python" -c 'import kafka, stream; print(stream.__file__)')" || got="(import failed)"
  if [ "$got" != "$REPO/stream/__init__.py" ]; then
    rm -rf "$CLONE_VENV"
    log "ERROR: the clone venv imports stream from $got, not from $REPO"
    exit 1
  fi
  echo "$KEY" > "$MARK"
  log "clone venv $CLONE_VENV over $VENV in $((SECONDS - t0)) s"
fi
echo "$CLONE_VENV"
