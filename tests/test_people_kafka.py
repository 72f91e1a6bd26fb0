"""Personal state on the real broker: kills, rebalances and forget with the changelog prefstream.people.

Oracles (integers, compared exactly):
* per person and personal model, the ``version`` (learned-event count) of the person's latest
  record on the compacted changelog equals the number of that person's events sent: no person
  loses an update or gets one twice across a SIGKILL, a failover and a rebalance;
* the population's training counts and event-id digests on the model topic (as in
  tests/test_workers_kafka.py);
* after ``prefstream forget``, the person's last changelog record is a tombstone, and the worker
  holds them neither in memory nor in its store.
"""

from __future__ import annotations

import asyncio
import collections
import json
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from stream.contract.people import decode_person
from tests.test_workers_kafka import REPO, Stack, expected_digest, free_port, metric_value, scrape

pytestmark = pytest.mark.kafka

CRIT = ["a", "b", "c"]
MODELS = "linear-bt-personal,capacity-personal"


class PeopleStack(Stack):
    """A :class:`Stack` with a compacted people changelog of ``people_partitions`` partitions."""

    def __init__(self, bootstrap, kafka_options, tmp, partitions: int = 3, people_partitions: int = 3) -> None:
        super().__init__(bootstrap, kafka_options, tmp, partitions=partitions)
        from stream.broker import TopicSpec, create_topics

        self.topics["people"] = self.topics["models"].replace(".models.", ".people.")
        create_topics(None, {self.topics["people"]: TopicSpec(people_partitions, {"cleanup.policy": "compact"})},
                      client_options=self.opts)

    def env(self, **extra) -> dict:
        env = super().env(**extra)
        env.setdefault("PREFSTREAM_MODELS", MODELS)
        env.setdefault("PREFSTREAM_FEATURE_NAMES", ",".join(CRIT))
        return env

    def people(self) -> dict:
        """The changelog compacted by hand: the last value per key (None = tombstone), in topic order."""
        last = {}
        for k, v in self.read("people", timeout=1.0):
            last[k.decode()] = v
        return last


def person_event(i: int, rng, users: list[str]) -> tuple[str, str, bytes]:
    u = users[min(int(rng.zipf(1.3)) - 1, len(users) - 1)]
    xl, xr = rng.random(3), rng.random(3)
    y = 1 if (xl - xr) @ np.array([1.0, -0.5, 0.25]) + (0.3 if u.endswith("7") else 0.0) * (xl[1] - xr[1]) > 0 else -1
    eid = f"p{i}"
    ev = {"schema_version": 1, "event_id": eid, "timestamp": 1700000000 + i, "user_id": u,
          "left": {"features": dict(zip(CRIT, map(float, xl)))}, "right": {"features": dict(zip(CRIT, map(float, xr)))},
          "outcome": y}
    return u, eid, json.dumps(ev).encode()


def test_kills_and_rebalances_lose_no_person_update_and_apply_none_twice(kafka_bootstrap, kafka_options, tmp_path):
    """Two workers, 4 input partitions over a 3-partition changelog (partitions 0 and 3 share one);
    people idle 0.5 s leave memory and come back from the store. SIGKILL one mid-stream (the
    survivor restores its partitions' people from the changelog), start a third (a rebalance),
    SIGTERM all: every person's version on the changelog equals their events sent."""
    s = PeopleStack(kafka_bootstrap, kafka_options, tmp_path, partitions=4, people_partitions=3)
    env = {"PREFSTREAM_SNAPSHOT_EVERY_EVENTS": "50", "PREFSTREAM_PEOPLE_TTL_SECONDS": "0.5"}
    try:
        a = s.start("learn", **env)
        port = free_port()
        s.start("learn", "--metrics-port", str(port), **env)
        s.wait(lambda: s.settled([0, 1], 4) or None, 60, "both workers assigned two partitions each")
        rng = np.random.default_rng(11)
        users = [f"person-{k}" for k in range(80)]
        events = [person_event(i, rng, users) for i in range(2400)]
        sent = collections.Counter(u for u, _, _ in events)
        N = len(events)

        def produce():  # ~6 s of stream, keyed by person: the kill and the rebalance land while it flows
            for k in range(0, N, 100):
                s.send("preferences", [(u, v) for u, _, v in events[k:k + 100]])
                time.sleep(0.25)

        t = threading.Thread(target=produce)
        t.start()
        s.wait(lambda: s.totals("linear-bt-personal")[0] >= 400 or None, 90, "first snapshots")
        held = s.assignment(0)
        a.send_signal(signal.SIGKILL)
        a.wait(10)
        assert held, f"the killed worker held no partition:\n{s.log_text()}"
        s.wait(lambda: s.assignment(1) == set(range(4)) or None, 120, "the survivor to take every partition")
        s.start("learn", **env)  # a third member: another rebalance, its partitions restored from the changelog
        t.join(60)
        s.wait(lambda: s.settled([1, 2], 4) or None, 60, "the survivor and the newcomer to split the partitions")
        for model in MODELS.split(","):
            s.wait(lambda m=model: s.totals(m)[0] >= N or None, 120, f"{N} events learned by {model}")
        assert metric_value(scrape(port), "prefstream_people_restored_total") > 0, "nothing restored from the changelog"
        for p in s.procs[1:]:  # final snapshots and people, committed: any double learning would show now
            p.send_signal(signal.SIGTERM)
        for p in s.procs[1:]:
            assert p.wait(60) == 0, s.log_text()
        logs = s.log_text()
        assert "people of" in logs and "restored from" in logs
        for model in MODELS.split(","):
            n, d = s.totals(model)
            assert n == N and d == expected_digest(e for _, e, _ in events), (model, n)
        people = s.people()
        for model in MODELS.split(","):
            versions = {}
            for key, value in people.items():
                m, _, user = key.partition("@")
                if m == model:
                    assert value is not None
                    state, info = decode_person(value)
                    versions[user] = state["meta"]["version"]
                    assert info["source"].startswith(s.topics["preferences"] + ":")
            lost = {u: (n, versions.get(u)) for u, n in sent.items() if versions.get(u, 0) < n}
            twice = {u: (n, versions[u]) for u, n in sent.items() if versions.get(u, 0) > n}
            assert not lost and not twice and set(versions) == set(sent), (model, lost, twice)
    finally:
        s.close()


def test_forget_leaves_no_trace_in_memory_store_or_changelog(kafka_bootstrap, kafka_options, tmp_path):
    """A learner worker in this process (its memory and store inspectable) on the broker;
    `prefstream forget` as a user runs it."""
    from stream.settings import Settings
    from stream.workers.learner import LearnerLoop, attach_people
    from stream.workers.learner_core import LearnerCore

    s = PeopleStack(kafka_bootstrap, kafka_options, tmp_path, partitions=2, people_partitions=2)
    try:
        env = s.env(PREFSTREAM_SNAPSHOT_EVERY_EVENTS="20")
        settings = Settings.load(None, None, environ={k: v for k, v in env.items() if k.startswith("PREFSTREAM_")})
        core = LearnerCore(settings)
        keeper = attach_people(core, path=str(tmp_path / "people"))
        loop_box: dict = {}

        def run():
            async def main():
                loop_box["worker"] = LearnerLoop(core)
                loop_box["loop"] = asyncio.get_running_loop()
                return await loop_box["worker"].run()

            loop_box["rc"] = asyncio.run(main())

        th = threading.Thread(target=run, daemon=True)
        th.start()
        rng = np.random.default_rng(4)
        users = ["victim", "bystander-1", "bystander-2"]
        events = [person_event(i, rng, users) for i in range(300)]
        s.send("preferences", [(u, v) for u, _, v in events])
        victim_keys = [f"{m}@victim" for m in MODELS.split(",")]
        s.wait(lambda: all(k in s.people() and s.people()[k] is not None for k in victim_keys) or None, 90,
               "the victim's state on the changelog")
        s.wait(lambda: s.totals("linear-bt-personal")[0] >= 300 or None, 60, "every event learned")
        out = subprocess.run([sys.executable, "-m", "stream", "forget", "victim"], cwd=REPO, env=env,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert "forget requested: user_id=victim" in out.stdout and "partitions=2" in out.stdout
        s.wait(lambda: all(s.people().get(k, b"") is None for k in victim_keys) or None, 60,
               "tombstones on the changelog")
        # a bystander's later event still lands: the worker goes on
        s.send("preferences", [(u, v) for u, _, v in [person_event(1000, np.random.default_rng(0), ["bystander-1"])]])
        s.wait(lambda: s.totals("linear-bt-personal")[0] >= 301 or None, 60, "the event after the forget")

        async def probe():  # on the worker's own loop, while it runs
            held = [(name, "victim" in slot.learner.people(), slot.learner.person_info("victim"))
                    for st in core.sources.values() for name, slot in st.slots.items()]
            return held, keeper.store.keys()

        held, keys = asyncio.run_coroutine_threadsafe(probe(), loop_box["loop"]).result(30)
        loop_box["loop"].call_soon_threadsafe(loop_box["worker"].stop.set)
        th.join(60)
        assert loop_box.get("rc") == 0
        # memory: no learner holds or knows the person (person_info also asks the store through the loader)
        assert len(held) >= 2 * 2 and all(not h and info == {"personalized": False, "version": 0}
                                          for _, h, info in held), held
        assert not [k for k in keys if k.endswith(b"@victim")]  # the store
        assert [k for k in keys if k.endswith(b"@bystander-1")]
        # the changelog, compacted by hand: the tombstone is the victim's last record
        records = [(k.decode(), v) for k, v in s.read("people", timeout=1.0)]
        for key in victim_keys:
            mine = [v for k, v in records if k == key]
            assert mine and mine[-1] is None and any(v is not None for v in mine[:-1])
        assert core.metrics.people_forgotten.labels(model="capacity-personal")._value.get() == pytest.approx(1.0)
        keeper.store.destroy()
    finally:
        s.close()


def test_forget_refuses_a_bad_user_id_in_one_line(kafka_bootstrap, kafka_options, tmp_path):
    s = PeopleStack(kafka_bootstrap, kafka_options, tmp_path, partitions=1, people_partitions=1)
    try:
        out = subprocess.run([sys.executable, "-m", "stream", "forget", "x" * 513], cwd=REPO, env=s.env(),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 1
        assert out.stderr.startswith("error: Cannot forget") and len(out.stderr.strip().splitlines()) == 1
        assert "Traceback" not in out.stderr
        assert s.read("preferences", timeout=1.0) == []  # nothing sent
    finally:
        s.close()
