"""An installed wheel (issue 12, finding 7): the embedded broker's scripts ship as package data, and
expected user errors of the CLI are one line and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys

import pytest

from stream.cli import main


def test_broker_status_without_the_scripts_is_one_line_not_a_traceback(monkeypatch, tmp_path, capsys):
    import stream.broker.lifecycle as lc

    monkeypatch.setattr(lc, "KAFKA_DEPLOY_DIR", tmp_path / "nowhere")
    for cmd in (["broker", "status"], ["broker", "start", "--timeout", "5"], ["broker", "stop"]):
        assert main(cmd) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: ") and "deploy/kafka" in err, err
        assert "Traceback" not in err


@pytest.mark.slow
def test_wheel_carries_the_broker_scripts_and_broker_status_answers(repo_root, tmp_path):
    wheel_dir, site = tmp_path / "wheel", tmp_path / "site"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                            "-w", str(wheel_dir), str(repo_root)], capture_output=True, text=True, timeout=600)
    if build.returncode != 0:
        pytest.fail(f"the wheel does not build:\n{build.stderr[-3000:]}")
    whl = next(wheel_dir.glob("prefstream-*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(whl)],
                   check=True, timeout=300)
    kafka = site / "stream" / "_deploy" / "kafka"
    assert {"start.sh", "stop.sh", "status.sh", "env.sh", "pom.xml", "server.properties", "ReadyProbe.java"} <= {
        p.name for p in kafka.iterdir()}
    assert (kafka.parent / "lib.sh").is_file()   # what the kafka and registry scripts source
    assert not (site / "stream" / "_deploy" / "grafana").exists()
    code = ("import sys; import stream.broker.lifecycle as lc; print(lc.KAFKA_DEPLOY_DIR); "
            "from stream.cli import main; sys.exit(main(['broker', 'status']))")
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path / "home")}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stdout.splitlines()[0] == str(kafka)  # the installed copy, not a checkout
    # a fresh HOME: no broker of ours runs there, so status says "not running" in its JSON (exit 1)
    assert out.returncode == 1 and '"running": false' in out.stdout
