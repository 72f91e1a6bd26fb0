"""One venv, one code (issue 22, finding 5): two clones sharing the cached dependency venv each run
their own code.

Two copies of this checkout, each with a planted marker (``stream.CLONE_MARK = "A"`` / ``"B"``),
get their venv from ``deploy/venv.sh --ensure`` with a private ``PREFSTREAM_CACHE`` whose
dependency venv is the one this test runs on (a symlink: ready, so the script only reads it).
From a neutral folder, each clone's interpreter, a worker-style subprocess
(``sys.executable -m stream``), its ``prefstream`` script and a pytest run inside it must report
that clone's marker; the dependency venv's listing must not change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRINT_MARK = ('import os as _os, sys as _sys\n'
              'if _os.environ.get("PREFSTREAM_TEST_PRINT_CLONE"):\n'
              '    print("clone", CLONE_MARK, file=_sys.stderr)\n')
WHICH_CLONE_TEST = '''
import os, subprocess, sys

import stream


def test_this_clone_and_its_subprocesses_run_this_clones_code():
    assert stream.CLONE_MARK == {mark!r}
    out = subprocess.run([sys.executable, "-m", "stream", "--help"], cwd="/", capture_output=True, text=True,
                         env={{**os.environ, "PREFSTREAM_TEST_PRINT_CLONE": "1"}}, timeout=120)
    assert out.returncode == 0 and "clone {mark}" in out.stderr, out.stderr
'''


def _deps_venv() -> Path:
    """The dependency venv this interpreter's packages come from (ready), or skip/fail."""
    path = Path(subprocess.run(["bash", str(REPO / "deploy" / "venv.sh"), "--deps"], capture_output=True, text=True,
                               check=True).stdout.strip())
    if not (path / ".prefstream-ready").is_file():
        msg = f"no ready dependency venv at {path} (deploy/venv.sh --ensure builds it)"
        if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on"):
            pytest.fail(msg + "; .ci/run builds it before the tests", pytrace=False)
        pytest.skip(msg)
    return path


def _copy_checkout(dest: Path) -> None:
    """Tracked and untracked, not ignored files of this checkout (symlinks kept)."""
    names = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src = REPO / name
        if not (src.exists() or src.is_symlink()):
            continue  # deleted in the work tree
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dest / name)
        else:
            shutil.copy2(src, dest / name)


def _listing(path: Path) -> list[tuple[str, int]]:
    site = next(path.glob("lib/python3*/site-packages"))
    # bytecode caches excepted: any interpreter using the venv may write them
    return sorted((p.name, p.stat().st_mtime_ns) for p in site.iterdir() if p.name != "__pycache__")


@pytest.mark.slow
def test_two_clones_sharing_the_dependency_venv_each_run_their_own_code(tmp_path):
    deps = _deps_venv()
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / deps.name).symlink_to(deps)
    before = _listing(deps)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PREFSTREAM_CACHE"] = str(cache)

    venvs = {}
    for mark in ("A", "B"):
        clone = tmp_path / f"clone-{mark}"
        _copy_checkout(clone)
        init = clone / "stream" / "__init__.py"
        init.write_text(init.read_text() + f"\nCLONE_MARK = {mark!r}\n" + PRINT_MARK)
        (clone / "tests" / "test_which_clone.py").write_text(WHICH_CLONE_TEST.format(mark=mark))
        made = subprocess.run(["bash", str(clone / "deploy" / "venv.sh"), "--ensure"], env=env, capture_output=True,
                              text=True, timeout=600)
        assert made.returncode == 0, made.stderr
        venvs[mark] = Path(made.stdout.strip().splitlines()[-1])
        assert venvs[mark] == clone / ".prefstream-venv"
        # a second call reuses it (same key) and prints the same path
        again = subprocess.run(["bash", str(clone / "deploy" / "venv.sh"), "--ensure"], env=env, capture_output=True,
                               text=True, timeout=120)
        assert again.stdout.strip() == str(venvs[mark]) and "clone venv" not in again.stderr, again.stderr

    neutral = tmp_path / "elsewhere"
    neutral.mkdir()
    run_env = {**env, "PREFSTREAM_TEST_PRINT_CLONE": "1"}
    for mark, venv in venvs.items():
        clone = venv.parent
        py = subprocess.run([str(venv / "bin" / "python"), "-c", "import stream; print(stream.CLONE_MARK, stream.__file__)"],
                            cwd=neutral, env=env, capture_output=True, text=True, timeout=120)
        assert py.stdout.split() == [mark, str(clone / "stream" / "__init__.py")], py.stderr
        cli = subprocess.run([str(venv / "bin" / "prefstream"), "--help"], cwd=neutral, env=run_env,
                             capture_output=True, text=True, timeout=120)
        assert cli.returncode == 0 and f"clone {mark}" in cli.stderr and "Usage: prefstream" in cli.stdout, cli.stderr
        tests = subprocess.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                str(clone / "tests" / "test_which_clone.py")], cwd=neutral, env=env,
                               capture_output=True, text=True, timeout=300)
        assert tests.returncode == 0 and "1 passed" in tests.stdout, tests.stdout[-3000:] + tests.stderr[-2000:]

    # the dependency venv alone runs neither clone, and nothing was installed into it
    alone = subprocess.run([str(deps / "bin" / "python"), "-c", "import stream; print(stream.__file__)"], cwd=neutral,
                           env=env, capture_output=True, text=True, timeout=120)
    assert not any(str(tmp_path / f"clone-{m}") in alone.stdout for m in venvs), alone.stdout
    assert _listing(deps) == before
