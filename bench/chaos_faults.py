"""The chaos benchmark's fault machinery: its own broker, a corrupt record batch on disk, the schedule.

Used by ``bench/chaos.py`` and by ``tests/test_chaos.py`` (which shares one :class:`OwnBroker`
per module). Nothing here touches the shared broker on 9092: :class:`OwnBroker` runs
``deploy/kafka/start.sh`` / ``stop.sh`` with its own ``PREFSTREAM_KAFKA_HOME`` (pid file, lock,
console log), data dir and ports, so ``stop.sh`` can only ever stop this broker.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KAFKA_DIR = REPO / "deploy" / "kafka"

#: every fault kind the schedule draws from
FAULT_KINDS = ("kill_learner", "start_learner", "term_learner", "broker_outage", "kill_explainer", "corrupt_batch")


def _free_port() -> int:
    from stream.demo.workers import free_port

    return free_port()


def shared_kafka_libs() -> Path:
    """The broker jars deploy/kafka/start.sh resolved for the shared broker (read-only use)."""
    version = os.environ.get("PREFSTREAM_KAFKA_VERSION", "4.4.0")
    cache = Path(os.environ.get("PREFSTREAM_CACHE", Path.home() / ".cache" / "prefstream"))
    return cache / "kafka" / version / "libs"


class OwnBroker:
    """A single-node broker of its own under ``root``: own home (pid file, lock, log), data dir, ports.

    Parameters
    ----------
    root : Path
        Folder for the broker's home; ``libs`` is a symlink to the shared jars.
    port, controller_port : int, optional
        Default: free ports now.
    """

    def __init__(self, root: Path, port: int | None = None, controller_port: int | None = None) -> None:
        self.root = Path(root)
        self.home = self.root / "kafka-home"
        self.data = self.home / "data"
        self.port = port or _free_port()
        self.controller_port = controller_port or _free_port()
        libs = shared_kafka_libs()
        if not (libs / ".complete").is_file():
            raise RuntimeError(f"no resolved broker jars in {libs}: run deploy/kafka/start.sh once (it resolves them)")
        if self.home.resolve() == libs.parent.resolve():
            raise RuntimeError("the chaos broker must not share the shared broker's home")
        self.home.mkdir(parents=True, exist_ok=True)
        if not (self.home / "libs").exists():
            (self.home / "libs").symlink_to(libs)
        self.env = dict(os.environ, PREFSTREAM_KAFKA_HOME=str(self.home), PREFSTREAM_KAFKA_DATA=str(self.data),
                        PREFSTREAM_KAFKA_PORT=str(self.port), PREFSTREAM_KAFKA_CONTROLLER_PORT=str(self.controller_port),
                        KAFKA_HEAP_OPTS=os.environ.get("PREFSTREAM_CHAOS_KAFKA_HEAP", "-Xms256m -Xmx768m"))

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, script: str, *args: str, timeout: float = 240) -> None:
        r = subprocess.run(["bash", str(KAFKA_DIR / script), *args], env=self.env, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError(f"{script} failed ({r.returncode}): {r.stderr[-2000:]}")

    def start(self, timeout: float = 180) -> str:
        """Start (or find running) this broker; returns its bootstrap address."""
        self._run("start.sh", "--timeout", str(int(timeout)), timeout=timeout + 120)
        return self.bootstrap

    def stop(self) -> None:
        """Controlled shutdown (SIGTERM; SIGKILL after 30 s) of this broker only."""
        self._run("stop.sh", timeout=120)

    def destroy(self) -> None:
        """Stop it and remove its home (data included)."""
        try:
            self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


# ----------------------------------------------------------------------------- corrupt batch
@dataclass
class Batch:
    """One record batch of a segment file: where it lies and which offsets it holds."""

    path: Path
    pos: int
    length: int  # bytes after the length field
    first: int
    last: int


def segment_batches(path: Path) -> list[Batch]:
    """The record batches (magic v2) of one ``.log`` segment file, in file order.

    Layout (Kafka protocol, RecordBatch v2): baseOffset int64, batchLength int32,
    partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16, lastOffsetDelta int32, …
    (61 header bytes), then the records, which the CRC covers.
    """
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            break
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        out.append(Batch(path, pos, length, base, base + delta))
        pos += 12 + length
    return out


def corrupt_batch(data_dir: Path, topic: str, partition: int, min_offset: int, rng: random.Random,
                  fallback: bool = True) -> Batch | None:
    """Flip 8 bytes inside the records of one batch of a *closed* segment of ``topic-partition``.

    The broker serves closed segments as they are on disk (zero-copy): the consumer's CRC check
    is the first to see it. The batch is one of the first three at or after ``min_offset`` (ahead
    of the consumers, so that it will be delivered); if every closed batch lies below it, the last
    closed one (delivered only to a consumer that re-reads) unless ``fallback`` is False. None
    when there is no such batch.
    """
    d = Path(data_dir) / f"{topic}-{partition}"
    segs = sorted(d.glob("*.log"))
    closed = segs[:-1]  # the newest segment is the active one
    batches = [b for s in closed for b in segment_batches(s) if b.length > 49 + 16]
    if not batches:
        return None
    ahead = [b for b in batches if b.first >= min_offset]
    if not ahead and not fallback:
        return None
    b = ahead[min(len(ahead) - 1, rng.randrange(3))] if ahead else batches[-1]
    records_start, end = b.pos + 61, b.pos + 12 + b.length
    at = records_start + rng.randrange(0, max(1, end - records_start - 8))
    with open(b.path, "r+b") as fh:
        fh.seek(at)
        raw = fh.read(8)
        fh.seek(at)
        fh.write(bytes(x ^ 0xFF for x in raw))
        fh.flush()
        os.fsync(fh.fileno())
    return b


# ----------------------------------------------------------------------------- schedule
@dataclass
class Fault:
    """One injected fault and its recovery (times in seconds from the start of the run)."""

    kind: str
    t: float
    detail: dict = field(default_factory=dict)
    t_ref: float | None = None  # recovery is measured from here (the fault's end: broker back, worker restarted)
    recovered_at: float | None = None
    paused_s: float = 0.0  # broker downtime (another fault) inside [t_ref, recovered_at]: not counted

    @property
    def recover_s(self) -> float | None:
        if self.recovered_at is None:
            return None
        return max(0.0, self.recovered_at - (self.t_ref or self.t) - self.paused_s)


def overlap(intervals, lo: float, hi: float) -> float:
    """Total length of ``intervals`` (``(start, end)`` pairs) inside ``[lo, hi]``.

    >>> overlap([(0, 5), (8, 12)], 3, 10)
    4
    """
    return sum(max(0, min(b, hi) - max(a, lo)) for a, b in intervals)


def schedule(seed: int, duration_s: float, kinds=FAULT_KINDS, max_faults: int | None = None,
             gap=(5.0, 15.0), outage=(10.0, 30.0)) -> list[tuple[float, str, float]]:
    """The seeded plan: ``(gap before the fault, kind, broker outage seconds)`` until ``duration_s``.

    Kinds are dealt from a shuffled deck (each kind once per round of ``len(kinds)`` faults), so
    that even a short run meets every kind; gaps and outages are uniform in ``gap`` / ``outage``.

    Examples
    --------
    >>> schedule(1, 60, max_faults=5) == schedule(1, 60, max_faults=5)
    True
    >>> len(schedule(1, 60, max_faults=5)) <= 5
    True
    """
    rng = random.Random(seed)
    out, t, deck = [], 0.0, []
    kinds = list(kinds)
    while kinds:
        g = rng.uniform(*gap)
        if t + g > duration_s or (max_faults is not None and len(out) >= max_faults):
            break
        if not deck:
            deck = list(kinds)
            rng.shuffle(deck)
        t += g
        out.append((g, deck.pop(), rng.uniform(*outage)))
    return out
