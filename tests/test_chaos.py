"""The chaos benchmark's short variant (about 60 s, 5 faults, fixed seed) on a broker of its own.

One module-scoped broker (``bench.chaos_faults.OwnBroker``: its own ports, home and data dir via
``deploy/kafka/start.sh``; the shared broker is never stopped) serves the run; the run is
``bench.chaos.run_chaos`` itself, so the suite checks what the benchmark measures:

* exactly once across SIGKILL/SIGTERM of learners, a broker outage, an explainer SIGKILL and a
  corrupt record batch: per model the snapshots' training count and digest of learned event ids
  equal the clean run's (every produced event once), except — all or nothing — the events of a
  corrupted batch that a consumer met corrupt (their bytes are gone on the only replica);
* no explanation record twice, every fault recovered, no partition idle with lag for more than
  one 30 s window.

Without a broker: the segment parser and the byte flip on a hand-built segment, and the schedule.
"""

from __future__ import annotations

import random
import struct

import pytest

from bench.chaos_faults import FAULT_KINDS, corrupt_batch, schedule, segment_batches, shared_kafka_libs
from tests.conftest import needs_data, skip_or_fail

SEED = 4  # kill_learner, broker_outage, kill_explainer, corrupt_batch, term_learner


# ----------------------------------------------------------------------------- without a broker
def _batch(base: int, n_records: int, payload: bytes) -> bytes:
    """A RecordBatch v2 frame: baseOffset, batchLength, epoch, magic, crc, attributes, lastOffsetDelta, … records."""
    rest = struct.pack(">ibIhiqqqhii", 0, 2, 0, 0, n_records - 1, 0, 0, -1, -1, -1, n_records) + payload
    return struct.pack(">qi", base, len(rest)) + rest


def test_segment_batches_reads_offsets_and_the_flip_lands_inside_the_records(tmp_path):
    d = tmp_path / "t-0"
    d.mkdir()
    seg = b"".join(_batch(b, 5, bytes(range(100))) for b in (0, 5, 10))
    (d / "00000000000000000000.log").write_bytes(seg)
    (d / "00000000000000000015.log").write_bytes(_batch(15, 5, bytes(100)))  # the active segment
    got = segment_batches(d / "00000000000000000000.log")
    assert [(b.first, b.last, b.pos) for b in got] == [(0, 4, 0), (5, 9, 161), (10, 14, 322)]
    b = corrupt_batch(tmp_path, "t", 0, min_offset=6, rng=random.Random(0))
    assert (b.first, b.last) == (10, 14)  # the first batch at or after offset 6, never in the active segment
    after = (d / "00000000000000000000.log").read_bytes()
    diff = [k for k in range(len(seg)) if seg[k] != after[k]]
    assert len(diff) == 8 and diff == list(range(diff[0], diff[0] + 8))
    assert 322 + 61 <= diff[0] and diff[-1] < 322 + 161  # inside that batch's records, its header intact
    assert all(after[k] == seg[k] ^ 0xFF for k in diff)
    assert (d / "00000000000000000015.log").read_bytes() == _batch(15, 5, bytes(100))
    # every closed batch below the consumer: the last closed one (met only by a consumer that re-reads)
    assert (corrupt_batch(tmp_path, "t", 0, min_offset=99, rng=random.Random(0)).first) == 10
    assert corrupt_batch(tmp_path, "nothing", 0, 0, random.Random(0)) is None


def test_the_schedule_is_seeded_and_deals_every_kind_once_per_round():
    a = schedule(SEED, 60, max_faults=5)
    assert a == schedule(SEED, 60, max_faults=5) and len(a) == 5
    assert all(5.0 <= g <= 15.0 and 10.0 <= o <= 30.0 for g, _, o in a)
    assert len({k for _, k, _ in a}) == 5  # one round of the deck: no kind twice
    long = schedule(7, 10_000, max_faults=12)
    assert sorted(k for _, k, _ in long) == sorted(FAULT_KINDS * 2)
    assert schedule(1, 4.0) == []  # no gap fits in 4 s


# ----------------------------------------------------------------------------- the short variant
@pytest.fixture(scope="module")
def own_broker(tmp_path_factory):
    from bench.chaos_faults import OwnBroker

    if not (shared_kafka_libs() / ".complete").is_file():
        skip_or_fail(f"no broker jars in {shared_kafka_libs()} (deploy/kafka/start.sh resolves them)")
    broker = OwnBroker(tmp_path_factory.mktemp("chaos-broker"))
    broker.start()
    yield broker
    broker.destroy()


@pytest.fixture(scope="module")
def chaos_run(own_broker, tmp_path_factory):
    from bench.chaos import run_chaos

    return run_chaos(own_broker, events=60_000, rate=1000, duration=60, seed=SEED, max_faults=5,
                     gpm_min_train=1000, settle_timeout=240, log_dir=tmp_path_factory.mktemp("chaos-logs"),
                     say=lambda m: print(m, flush=True))



@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.timeout(900)
@needs_data("pokemon")
def test_short_chaos_run_is_exactly_once_and_recovers_from_every_fault(chaos_run):
    r = chaos_run
    info = "\n".join([f"learned {r['learned']} of {r['events']}; lost {r['lost']}, duplicated {r['duplicated']}, "
                      f"corrupted {r['corrupted']}; worst stall {r['max_stall_s']} s at {r['max_stall_at']}; "
                      f"corrupt batches met (learners/explainer): {r['corrupt_met']}; "
                      f"exit codes {r['exit_codes']}; worker logs {r['log_dir']}"] + [str(f) for f in r["fault_table"]])
    assert r["events"] == 60_000 and r["failed_sends"] == 0
    assert r["fault_kinds"] == [k for _, k, _ in schedule(SEED, 60, max_faults=5)]
    assert r["unrecovered"] == 0, info
    # every produced event learned once by every model — or, all or nothing, all but a corrupted batch's
    assert r["duplicated"] == 0, info
    assert (r["digest_equal"] and r["lost"] == 0) or (r["digest_equal_without_corrupted"]
                                                      and r["lost"] == r["corrupted"] > 0), info
    assert r["explanation_dupes"] == 0 and r["explanations"] > 0, info
    assert r["max_stall_s"] <= 30.0, info
