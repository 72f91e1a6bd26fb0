"""Two explainer processes in one group on the real broker: they split the partitions, a SIGKILLed one's
partitions move to the other, and every sampled event is explained exactly once per method."""

from __future__ import annotations

import json
import re
import signal

import numpy as np

from tests.test_workers_kafka import Stack, free_port, metric_value, pref_event, scrape


def _assigned(log_text: str) -> list[str]:
    """The preference partitions of the last 'partitions assigned' line of a worker log."""
    lines = re.findall(r"partitions assigned: \[(.*)\]", log_text)
    return sorted(re.findall(r"preferences\.[0-9a-f]+', partition=(\d+)", lines[-1])) if lines else []


def test_two_explainers_split_the_partitions_and_the_survivor_of_a_sigkill_explains_the_rest_once(
        kafka_bootstrap, kafka_options, tmp_path):
    stack = Stack(kafka_bootstrap, kafka_options, tmp_path)
    try:
        rng = np.random.default_rng(21)
        events = [pref_event(i, rng, prefix="so") for i in range(600)]
        stack.start("learn")
        stack.send("preferences", events[:20])  # a first model before the explainers start
        stack.wait(lambda: stack.totals()[0] == 20 or None, 90, "20 learned events")
        ports = [free_port(), free_port()]
        a = stack.start("explain", "--metrics-port", str(ports[0]), "--sample-rate", "1.0")
        stack.start("explain", "--metrics-port", str(ports[1]), "--sample-rate", "1.0")
        logs = stack.logs[1:]

        def split():
            got = [_assigned(p.read_text()) for p in logs]
            return got if all(got) and sorted(got[0] + got[1]) == ["0", "1", "2"] else None

        owned = stack.wait(split, 90, "both explainers to own preference partitions")
        stack.send("preferences", events[20:300])

        def explained():
            return {json.loads(v)["request_id"] for _, v in stack.read("explanations")}

        stack.wait(lambda: len(explained()) == 300 or None, 120, "the first 300 events explained")

        def per_process():  # counted once delivered (acks): may trail the records by a moment
            got = [metric_value(scrape(p), "prefstream_explained_events_total", method="linear-shapley",
                                model="linear-bt") for p in ports]  # labels in exposition (sorted) order
            return got if sum(got) == 300 else None

        shares = stack.wait(per_process, 30, "300 explained events counted")
        assert all(n > 0 for n in shares), shares  # both explainers did a share

        a.send_signal(signal.SIGKILL)
        a.wait(10)
        stack.send("preferences", events[300:])  # some land on the killed explainer's partitions
        stack.wait(lambda: _assigned(logs[1].read_text()) == ["0", "1", "2"] or None, 90,
                   "the survivor to own every preference partition")
        stack.wait(lambda: len(explained()) == 600 or None, 120, "all 600 events explained")
        recs = [json.loads(v) for _, v in stack.read("explanations")]
        keys = [(r["request_id"], r["model_name"], r["method"]) for r in recs]
        assert len(keys) == len(set(keys)) == 600, "an event was explained twice"
        assert {r["request_id"] for r in recs} == {eid for eid, _ in events}
    finally:
        stack.close()
