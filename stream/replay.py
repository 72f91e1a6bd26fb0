"""Replay a CSV or JSONL file into a Kafka topic as contract-valid records (``prefstream replay FILE``).

Every line becomes one record of the event contract (:mod:`stream.contract`), is validated at
the source with :func:`stream.contract.validate_record`, encoded with orjson (preference CSV
rows straight to the same bytes without a dict, :mod:`stream.adapters.record_bytes`) and sent
in chunks with a confluent-kafka (librdkafka) producer (``acks="all"``, idempotence on, key =
``event_id`` / ``session_id`` / ``item_id`` as UTF-8, ``linger_ms`` batching;
:mod:`stream.broker.producer` maps the kafka-python options of the rest of prefstream onto it).
A line that cannot be turned into a valid record is *skipped* (counted, reported with its line
number, not fatal); a record the producer fails to deliver is *failed*.

The file layouts, and the reading of a file into records, are :mod:`stream.event_files`'.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from learners.exceptions import InvalidParameterError, PrefstreamError, check_param
from stream.event_files import _KINDS, _count_lines, _iter_chunks

__all__ = ["BrokerUnavailable", "ReplayInterrupted", "ReplayResult", "TokenBucket", "replay"]

_MAX_REPORTED = 1000
_FAILURE_HINTS = {
    "MessageSizeTooLargeError": " (raise --max-request-bytes / PREFSTREAM_MAX_REQUEST_BYTES, and the topic's "
                                "max.message.bytes if the broker refuses it)",
    "KafkaTimeoutError": " (the broker did not acknowledge in time: is it reachable and the topic there?)",
}


class BrokerUnavailable(PrefstreamError, ConnectionError):
    """No Kafka broker answered at the bootstrap address."""


class ReplayInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`replay`; ``result`` counts what was sent (delivered) before it."""

    def __init__(self, result: "ReplayResult") -> None:
        super().__init__(f"interrupted after sending {result.sent} records")
        self.result = result


@dataclass
class ReplayResult:
    """Outcome of :func:`replay`.

    Attributes
    ----------
    sent : int
        Records acknowledged by the broker (``acks=all``).
    skipped : int
        Lines that could not be turned into a valid record.
    failed : int
        Records the producer could not deliver (errors from ``send`` or its future).
    seconds : float
        Wall-clock seconds from the first send to the final flush.
    skipped_lines : list of (int, str)
        ``(line number, reason)`` of the first 1000 skipped lines (line 1 is the CSV header).
    errors : list of str
        The first 1000 producer error messages.
    failure_reasons : dict of str to [int, str]
        Per failure reason (the producer error's class), ``[count, first message]``: every failed
        record is in exactly one reason, so the counts add up to ``failed``.
    """

    sent: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    skipped_lines: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    failure_reasons: dict = field(default_factory=dict)

    def failure_summary(self) -> list[str]:
        """One line per failure reason: ``"failed=<n> reason=<Error>: <first message><hint>"``."""
        out = []
        for reason, (n, msg) in sorted(self.failure_reasons.items(), key=lambda kv: -kv[1][0]):
            out.append(f"failed={n} reason={reason}: {msg}{_FAILURE_HINTS.get(reason, '')}")
        return out

    @property
    def events_per_s(self) -> float:
        """Acknowledged records per second."""
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def summary(self) -> str:
        """``"sent=… skipped=… failed=… seconds=… events_per_s=…"``."""
        return (f"sent={self.sent} skipped={self.skipped} failed={self.failed} "
                f"seconds={self.seconds:.3f} events_per_s={self.events_per_s:.1f}")


class TokenBucket:
    """Token-bucket pacer: at most ``rate`` acquisitions per second on average, bursts ≤ ``burst``.

    Parameters
    ----------
    rate : float
        Tokens per second, > 0.
    burst : float, optional
        Bucket capacity; default ``max(1, rate / 100)`` (≈ 10 ms of traffic).
    clock, sleep : callables
        Injected for tests (default :func:`time.monotonic`, :func:`time.sleep`).
    """

    def __init__(self, rate: float, burst: float | None = None, clock=time.monotonic, sleep=time.sleep) -> None:
        check_param("TokenBucket", "rate", rate,
                    isinstance(rate, (int, float)) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0,
                    "a float in the range (0, inf)")
        self.rate = float(rate)
        self.burst = float(burst) if burst is not None else max(1.0, self.rate / 100.0)
        check_param("TokenBucket", "burst", burst, self.burst >= 1.0, "a float ≥ 1")
        self._clock, self._sleep = clock, sleep
        self._tokens = self.burst
        self._last = clock()

    def acquire(self) -> None:
        """Take one token, sleeping until one is available."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return
        # sleep until the next token exists, then spend it; account from the due time, not from
        # the (possibly later) wake-up, so oversleeping is caught up within the burst size
        wait = (1.0 - self._tokens) / self.rate
        self._sleep(wait)
        self._last = now + wait
        self._tokens = 0.0


# ---------------------------------------------------------------------------- sending
def replay(path: str | Path, bootstrap: str | list[str], topic: str, rate: float | None = None,
           kind: str = "preference", progress: bool = True, client_options: dict | None = None,
           max_report: int = 20, wire=None, key: str = "event") -> ReplayResult:
    """Send every valid record of ``path`` to ``topic`` and wait until the broker acknowledged them.

    Parameters
    ----------
    path : path
        CSV or JSONL file (layouts in the module docstring).
    bootstrap : str or list of str
        ``"host:port[,host:port]"`` of the Kafka cluster.
    topic : str
        Destination topic.
    rate : float, optional
        Target records per second (token bucket); ``None`` = as fast as possible.
    kind : {"preference", "click", "item"}
    progress : bool, default True
        Show a tqdm progress bar on stderr and report the first ``max_report`` skipped lines.
    client_options : dict, optional
        Producer options in kafka-python's names (security options from
        :meth:`stream.settings.Settings.kafka_client_options`, ``max_request_size`` /
        ``compression_type`` from :meth:`~stream.settings.Settings.producer_options`, and
        ``bootstrap_timeout_ms``, how long to wait for the broker, default 10 s), mapped onto
        librdkafka by :func:`stream.broker.producer.confluent_config`; librdkafka properties
        (``"linger.ms"``) pass through. They override the defaults ``acks="all"``, idempotence on,
        ``linger_ms=20``, ``batch_size=1 MiB``, no compression.
    max_report : int, default 20
        Skipped lines printed to stderr when ``progress`` is true.
    wire : wire format, optional
        A :mod:`stream.broker.serializers` format (:class:`~stream.broker.serializers.AvroFormat`,
        :class:`~stream.broker.serializers.JSONSchemaFormat`): each record is written in it (its
        schema registered under ``<topic>-value`` on first use); None = plain JSON.
    key : {"event", "user"}, default "event"
        The Kafka key: the record's ``event_id`` / ``session_id`` / ``item_id``, or with ``"user"``
        its ``user_id`` where it has one (a person's events then land on one partition, in order;
        records without a ``user_id`` keep their id).

    Returns
    -------
    ReplayResult

    Raises
    ------
    BrokerUnavailable
        If no broker answers at ``bootstrap`` (the message carries librdkafka's last error, e.g.
        an authentication or TLS failure).
    InvalidParameterError
        Bad ``kind``, ``rate``, missing or unsupported file, or a client option librdkafka lacks.

    Notes
    -----
    The producer is confluent-kafka (librdkafka), chosen by measurement (``bench/replay_rate.py``,
    bench/results/replay.md): records are encoded as they are read, a chunk of about 4 MiB at a time
    (preference CSV rows straight to bytes, :mod:`stream.adapters.record_bytes`), handed to
    librdkafka's queue in one loop (:meth:`~stream.broker.producer.Sender.send_many`), and
    batched, compressed and sent by its own threads while the next chunk is read; only failures
    call back into Python.
    """
    from stream.broker.producer import Sender

    check_param("replay", "kind", kind, kind in _KINDS, f"one of {_KINDS}")
    check_param("replay", "key", key, key in ("event", "user"), "'event' or 'user'")
    if rate is not None:
        check_param("replay", "rate", rate, isinstance(rate, (int, float)) and not isinstance(rate, bool)
                    and math.isfinite(rate) and rate > 0, "a float in the range (0, inf) or None")
    p = Path(path)
    if not p.is_file():
        raise InvalidParameterError(f"Replay file {str(p)!r} does not exist or is not a file.")
    servers = [s.strip() for s in bootstrap.split(",")] if isinstance(bootstrap, str) else list(bootstrap)
    opts: dict[str, Any] = {"client_id": "prefstream-replay", **(client_options or {}), "bootstrap_servers": servers}
    probe_s = float(opts.get("bootstrap_timeout_ms") or 10_000) / 1000.0

    res = ReplayResult()

    def failed(reason: str, msg: str) -> None:
        res.failed += 1
        if len(res.errors) < _MAX_REPORTED:
            res.errors.append(f"{reason}: {msg}")
        slot = res.failure_reasons.setdefault(reason, [0, " ".join(msg.split())[:300]])
        slot[0] += 1

    sender = Sender(opts, failed)
    if not sender.probe(probe_s):
        sender.flush(0)
        why = f" (last error: {sender.last_error})" if sender.last_error else ""
        raise BrokerUnavailable(f"No Kafka broker answers at {','.join(servers)}{why}; start the local one with "
                                "`prefstream broker start` or pass the address of your cluster.") from None

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=_count_lines(p), unit="ev", desc=f"replay {p.name} → {topic}", file=sys.stderr,
                   dynamic_ncols=True, mininterval=0.5)
    bucket = TokenBucket(rate) if rate is not None else None
    t0 = time.perf_counter()
    try:
        for chunk in _iter_chunks(p, kind, key):
            if wire is not None and wire.name != "json":
                chunk.values = [wire.frame(v) for v in chunk.values]
            for line, why in chunk.skipped:
                res.skipped += 1
                if len(res.skipped_lines) < _MAX_REPORTED:
                    res.skipped_lines.append((line, why))
                if bar is not None and res.skipped <= max_report:
                    bar.write(f"skipped line {line}: {why}", file=sys.stderr)
            if bucket is None:
                sender.send_many(topic, chunk.keys, chunk.values)
                if bar is not None:
                    bar.update(len(chunk))
            else:  # paced: the bar moves record by record
                if bar is not None:
                    bar.update(len(chunk.skipped))
                for key, value in zip(chunk.keys, chunk.values):
                    bucket.acquire()
                    sender.send(topic, key, value)
                    sender.poll(0)
                    if bar is not None:
                        bar.update(1)
            sender.poll(0)
        sender.flush()
    except KeyboardInterrupt:  # Ctrl-C: deliver what was queued (5 s at most) and say how much went out
        sender.flush(5)
        res.sent = sender.delivered
        raise ReplayInterrupted(res) from None
    finally:
        res.seconds = time.perf_counter() - t0
        if bar is not None:
            bar.close()
    res.sent = sender.delivered
    return res
