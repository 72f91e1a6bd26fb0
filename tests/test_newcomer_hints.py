"""What a newcomer meets first (issue 22, item 8): a CSV without its outcome column, a click file run
as preferences, skip reasons under ``replay --no-progress``."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from learners.exceptions import InvalidInputError
from stream.cli import app
from stream.event_files import iter_records

runner = CliRunner()


def test_a_csv_without_the_outcome_column_is_one_error_naming_it(tmp_path):
    f = tmp_path / "prefs.csv"
    f.write_text("event_id,left.a,right.a\ne1,1,2\ne2,3,4\n")
    with pytest.raises(InvalidInputError, match=r"prefs\.csv has no 'outcome' column"):
        list(iter_records(f, "preference", on_error="skip"))
    res = runner.invoke(app, ["run", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-q"])
    assert res.exit_code == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: prefs.csv has no 'outcome' column")
    assert "schema_version" not in res.output


def test_a_bad_csv_row_dead_letters_with_its_own_reason(tmp_path):
    f = tmp_path / "prefs.csv"
    f.write_text("event_id,outcome,left.a,right.a\ne1,1,1,2\ne2,maybe,3,4\ne3,1,x,4\n")
    res = runner.invoke(app, ["run", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-q", "-m", "linear-bt"])
    assert res.exit_code == 0, res.output
    dead = [json.loads(x) for x in (tmp_path / "out.dead-letters.jsonl").read_text().splitlines()]
    assert [(d["reason"], d["detail"]) for d in dead] == [
        ("schema_violation", "line 3: column 'outcome' must be 1, -1 or 0; got 'maybe'"),
        ("schema_violation", "line 4: column 'left.a' must be a number; got 'x'"),
    ]


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_run_on_click_sessions_without_kind_click_says_so(tmp_path, suffix):
    f = tmp_path / f"clicks.{suffix}"
    if suffix == "jsonl":
        f.write_text(json.dumps({"schema_version": 1, "session_id": "s1", "timestamp": 1,
                                 "shown": [{"id": "a", "features": {"x": 1.0}}, {"id": "b", "features": {"x": 2.0}}],
                                 "clicked": ["a"]}) + "\n")
    else:
        f.write_text("session_id,shown,clicked\ns1,a|b,a\n")
    res = runner.invoke(app, ["run", "-i", str(f), "-o", str(tmp_path / "out.jsonl"), "-q"])
    assert res.exit_code == 2
    assert res.stderr.strip() == (f"error: clicks.{suffix} holds click sessions (session_id, shown, clicked), "
                                  "not preference events; pass --kind click.")
    assert not (tmp_path / "out.jsonl").exists()


def test_replay_without_progress_still_prints_the_skip_reasons(tmp_path, kafka_bootstrap, unique_topic):
    topic = unique_topic("noprog")
    f = tmp_path / "prefs.csv"
    f.write_text("event_id,outcome,left.a,right.a\ne1,1,1,2\ne2,maybe,3,4\ne3,1,2,1\ne4,1,,1\n")
    res = runner.invoke(app, ["replay", str(f), "--bootstrap", kafka_bootstrap, "--topic", topic, "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "sent=2 skipped=2 failed=0" in res.stdout
    assert res.stderr.splitlines() == ["skipped line 3: column 'outcome' must be 1, -1 or 0; got 'maybe'",
                                       "skipped line 5: left item has neither feature values (left.<feature>) nor left_id"]
