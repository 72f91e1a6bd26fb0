"""``prefstream run``: the same learners and explainers over a file, without Kafka.

For users who want a batch replay of logged data. The file's records go, in order, through the
very state machines the workers run (:class:`stream.workers.learner_core.LearnerCore` and
:class:`stream.workers.explainer.ExplainerCore`): validation with dead letters, progressive
validation, learning, snapshots every ``snapshot_every_events``, refits (inline), and sampled
explanations. The output file receives the same explanation records (``explanation.v1``) as the
output topic, one JSON object per line; dead letters go to ``<output>.dead-letters.jsonl``.

File mode is stream mode: the records are taken in micro-batches of ``batch_max_events``, as the
learner worker takes them from Kafka, and each batch goes through
:meth:`LearnerCore.process_batch <stream.workers.learner_core.LearnerCore.process_batch>` — one
decode-and-validate pass, per model one ``predict_proba_many`` on the pre-batch state (progressive
validation) and one ``learn_many``, the refit trigger checked once — so the models and progressive
metrics equal those of a worker that received the same batches (``tests/test_batch_file_mode.py``).

Order of work per batch: learn (and publish a snapshot when due), then explain the batch's sampled
events with the latest published snapshot — the explainer never sees a model newer than a snapshot,
as in the stream — in calls of at most :data:`EXPLAIN_BATCH_MAX` events per method (one
``fn(learner, examples, ctx)`` call explains them together; click sessions one session per call).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from learners.exceptions import InvalidParameterError
from stream.workers.progressive import progressive_values

__all__ = ["EXIT_NOTHING_LEARNED", "EXPLAIN_BATCH_MAX", "BatchResult", "nothing_learned", "progressive_values",
           "refusal_summary", "run_batch"]

log = logging.getLogger(__name__)

#: Most sampled events explained by one call of an explainer (bounded memory and call time).
EXPLAIN_BATCH_MAX = 8

#: ``prefstream run``'s exit status when a model learned no record (every record refused, an empty
#: file, or a model that refused every event): the summary is still printed (docs/workers.md).
EXIT_NOTHING_LEARNED = 3


@dataclass
class BatchResult:
    """Counts and timings of a batch run (also the report's summary)."""

    records: int = 0
    learned: dict = field(default_factory=dict)
    dead_letters: int = 0
    #: dead letters by reason, and where they were written (``<output>.dead-letters.jsonl``)
    dead_letter_reasons: dict = field(default_factory=dict)
    dead_letters_file: str = ""
    #: the detail of the first dead letter of each reason (for the closing hint)
    dead_letter_examples: dict = field(default_factory=dict, repr=False)
    duplicates: int = 0
    #: per model {"learned", "dead_letters", "duplicates"}: records = their sum for every model
    #: (preference input; a click session counts its pairs)
    tally: dict = field(default_factory=dict)
    explanations: dict = field(default_factory=dict)
    latency_ms: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)
    refits: int = 0
    progress: list = field(default_factory=list)
    final: dict = field(default_factory=dict)
    seconds: float = 0.0
    #: seconds until the last record was learned (before waiting for a refit in flight)
    learn_seconds: float = 0.0
    #: per model, the learner at the end of the run (not part of the summary)
    learners: dict = field(default_factory=dict, repr=False)

    def summary(self) -> dict:
        """JSON-able summary for :func:`stream.report.write_report`."""
        out: dict[str, Any] = {"records": self.records, "dead_letters": self.dead_letters,
                               "dead_letters_by_reason": dict(sorted(self.dead_letter_reasons.items())),
                               "dead_letters_file": self.dead_letters_file, "duplicates": self.duplicates,
                               "seconds": round(self.seconds, 2), "learn_seconds": round(self.learn_seconds, 2),
                               "refits": self.refits,
                               "explanations": sum(self.explanations.values())}
        for m, n in self.learned.items():
            out[f"learned[{m}]"] = n
        for m, t in self.tally.items():
            out[f"dead_letters[{m}]"] = t["dead_letters"]
            out[f"duplicates[{m}]"] = t["duplicates"]
        for m, v in self.final.items():
            for k, x in v.items():
                out[f"{k}[{m}]"] = x
        for meth, n in sorted(self.explanations.items()):
            out[f"explanations[{meth}]"] = n
            out[f"median_ms[{meth}]"] = round(statistics.median(self.latency_ms[meth]), 3) if self.latency_ms.get(meth) else None
        out["progress"] = self.progress
        out["snapshots"] = self.snapshots
        return out


def _raw_records(path: Path, kind: str) -> Iterator[tuple[int, bytes | None, str | None]]:
    """(line, raw bytes, None) per record: JSONL lines verbatim (bad ones dead-letter later), CSV rows
    as JSON; (line, None, why) for a CSV row that is no record."""
    from stream.event_files import _iter_raw

    if path.suffix.lower() in (".jsonl", ".ndjson", ".json"):
        with open(path, "rb") as fh:
            for line, raw in enumerate(fh, start=1):
                if raw.strip():
                    yield line, raw.rstrip(b"\r\n"), None
        return
    for line, rec, why in _iter_raw(path, kind):
        yield line, (json.dumps(rec).encode() if rec is not None else None), why


def _row_dead_letter(line: int, why: str, topic: str, offset: int) -> dict:
    """A CSV row that could not become a record, as a dead letter with its own reason and line."""
    from stream.contract import DEAD_LETTER_REASONS, dead_letter_record

    reason, _, detail = why.partition(": ")
    if reason not in DEAD_LETTER_REASONS:
        reason, detail = "schema_violation", why
    return dead_letter_record(None, reason, f"line {line}: {detail}", topic, 0, offset)


REPORT_FILES = ("index.html", "summary.json", "records.jsonl")


def output_clash(input_path: str | Path, output_path: str | Path, report_dir: str | Path | None = None,
                 items_path: str | Path | None = None) -> str | None:
    """Why :func:`run_batch` would overwrite one of its inputs, or ``None`` when it would not.

    The outputs are ``output_path``, its ``.dead-letters.jsonl`` and ``.drift.jsonl`` files and,
    with ``report_dir``, the report's ``index.html``, ``summary.json``, ``records.jsonl`` and PNG
    plots; paths are compared after resolving symbolic links and relative paths.

    Examples
    --------
    >>> output_clash("a.csv", "./a.csv")
    "error: the output 'a.csv' is the input file 'a.csv'; writing it would erase the input. Choose another -o."
    >>> output_clash("a.csv", "b.jsonl") is None
    True
    """
    out = Path(output_path)
    outs = [(out, "the output", "-o"), (out.with_name(out.stem + ".dead-letters.jsonl"), "the dead-letters file", "-o"),
            (out.with_name(out.stem + ".drift.jsonl"), "the drift file", "-o")]
    if report_dir is not None:
        outs += [(Path(report_dir) / name, "the report file", "--report-dir") for name in REPORT_FILES]
    for src in (input_path, items_path):
        if src is None:
            continue
        real = Path(src).resolve()
        for path, what, flag in outs:
            if path.resolve() == real or (flag == "--report-dir" and real.suffix.lower() == ".png"
                                          and real.parent == Path(report_dir).resolve()):
                return (f"error: {what} {str(path if real.suffix.lower() != '.png' else real)!r} is the input file "
                        f"{str(src)!r}; writing it would erase the input. Choose another {flag}.")
    return None


def run_batch(input_path: str | Path, output_path: str | Path, *, settings=None, kind: str = "preference",
              items_path: str | Path | None = None, progress: bool = True, progress_every: int = 200,
              report_dir: str | Path | None = None, inline_refits: bool = False) -> BatchResult:
    """Learn from and explain a file of contract records; write explanation records to ``output_path``.

    Parameters
    ----------
    input_path : path
        ``.jsonl`` (one record per line) or ``.csv`` (the replay layout, see :mod:`stream.replay`).
    output_path : path
        Explanation records, JSON Lines. Dead letters go to ``<output>.dead-letters.jsonl``, drift
        records (:mod:`stream.monitoring.monitor`, if any alarm) to ``<output>.drift.jsonl``.
    settings : Settings, optional
        Models, feature names, model parameters, snapshot cadence and explain sample rate
        (default: ``Settings.load()``).
    kind : {"preference", "click"}
        What the input file holds.
    items_path : path, optional
        Item-catalog records (JSONL/CSV) loaded first, for events that refer to items by id.
    progress : bool
        Show a tqdm progress bar.
    progress_every : int
        Unused, kept for callers: the report's learning curve is the learner's own (its progressive
        metrics at event counts, :attr:`LearnerCore.curve <stream.workers.learner_core.LearnerCore.curve>`).
    report_dir : path, optional
        Also write the HTML report there (:func:`stream.report.write_report`).
    inline_refits : bool
        ``False`` (default): refits run where the worker runs them (``refit_executor``: a spawned
        process, or a thread) while learning goes on; the run waits for the last one at the end.
        Which batch a refitted model first scores then depends on timing, as in the worker.
        ``True``: each refit runs to completion where it is triggered, so a run is reproducible
        (and slower: a GPM refit blocks learning). With ``refit_executor = "PROCESS"`` the refit
        process is *spawned*: a script that calls ``run_batch`` must do so under
        ``if __name__ == "__main__":`` (the child imports the script's main module), as every
        ``multiprocessing`` program must; ``prefstream run`` does.

    Returns
    -------
    BatchResult

    Raises
    ------
    InvalidParameterError
        Unknown ``kind``, missing files, or a model that is not registered.
    """
    from tqdm import tqdm

    from stream.models import register_all
    from stream.contract import DeadLetter
    from stream.contract.batch import parse_batch
    from stream.settings import Settings
    from stream.workers.explainer import ExplainerCore
    from stream.workers.learner import warm_up
    from stream.workers.learner_core import LearnerCore

    if kind not in ("preference", "click"):
        raise InvalidParameterError(f"The 'kind' parameter of run_batch must be 'preference' or 'click'. Got {kind!r} instead.")
    inp, out = Path(input_path), Path(output_path)
    if not inp.exists():
        raise InvalidParameterError(f"Input file {str(inp)!r} does not exist.")
    if not inp.is_file():
        raise InvalidParameterError(f"Input {str(inp)!r} is not a file; pass a .jsonl or .csv file.")
    clash = output_clash(inp, out, report_dir, items_path)
    if clash is not None:
        raise InvalidParameterError(clash.removeprefix("error: "))
    if out.is_dir():
        raise InvalidParameterError(f"Output {str(out)!r} is a directory; pass a file path such as {str(out / 'explanations.jsonl')!r}.")
    settings = settings or Settings.load()
    # a file snapshots by its event count alone: the worker's once-a-second floor on count-triggered
    # snapshots (snapshot_min_seconds, broker load) would make what file mode explains depend on its speed
    settings = dataclasses.replace(settings, snapshot_min_seconds=0.0)
    register_all()  # the built-in models and explainers (stream.models)
    refits = _Refits(settings, inline_refits)
    try:
        learner = LearnerCore(settings, **refits.core_kwargs())
        warm_up(learner)  # the models' heavy imports (torch) before the clock starts, as the worker does
    except BaseException:
        refits.__exit__(None, None, None)
        raise
    explainer = ExplainerCore(settings)
    topic = settings.topic_clicks if kind == "click" else settings.topic_preferences
    st = learner.new_source(topic, 0, {})
    res = BatchResult()
    t0 = time.perf_counter()
    if items_path is not None:
        for i, raw, why in _raw_records(Path(items_path), "item"):
            if raw is None:
                log.warning("items file %s, line %d skipped: %s", items_path, i, why)
                continue
            learner.on_item(None, raw, 0, i)
            explainer.on_item(None, raw, 0, i)
    out.parent.mkdir(parents=True, exist_ok=True)
    dead_path = out.with_name(out.stem + ".dead-letters.jsonl")
    all_records: list[dict] = []
    total = None
    try:
        with open(inp, "rb") as fh:
            total = sum(1 for _ in fh) - (1 if inp.suffix.lower() == ".csv" else 0)
    except OSError:
        pass

    def dead_letter(dl: dict, line: int | None) -> None:
        """Write one dead letter, with the 1-based line of the input file it came from."""
        if line is not None:
            dl["line"] = line
            if not dl["detail"].startswith(f"line {line}: "):
                dl["detail"] = f"line {line}: {dl['detail']}"
        res.dead_letters += 1
        res.dead_letter_reasons[dl["reason"]] = res.dead_letter_reasons.get(dl["reason"], 0) + 1
        res.dead_letter_examples.setdefault(dl["reason"], dl["detail"])
        fd.write(json.dumps(dl) + "\n")

    def publish() -> None:
        records, _acks, versions = learner.build_snapshots(st)
        for key, value in records:
            explainer.on_snapshot(key, value)
        learner.snapshot_done(st, versions, True)
        for name, (version, _) in versions.items():
            res.snapshots[name] = version

    def curve_points() -> None:
        """The learner's own learning-curve points (its progressive metrics at event counts)."""
        for pt in learner.drain_curve():
            res.progress.append({k: pt[k] for k in ("events", "model", "accuracy", "roc_auc", "log_loss")})

    def final_points() -> None:
        """The last point of each model: its progressive metrics at its final event count."""
        learner.end_curve()
        curve_points()

    try:
        fo, fd = open(out, "w", encoding="utf-8"), open(dead_path, "w", encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError(f"Cannot write the output {str(out)!r}: {exc.strerror}. Choose a writable file path.") from None
    batch_max = int(settings.batch_max_events)
    sampled = 0
    with fo, fd, refits:
        bar = tqdm(total=total, disable=not progress, unit="rec", desc=f"prefstream run {inp.name}")
        for chunk in _micro_batches(_raw_records(inp, kind), batch_max):
            res.records += len(chunk)
            good, lines = [], {}
            for offset, line, raw, why in chunk:
                if raw is None:  # a CSV row that is no record: its own reason and line
                    dead_letter(_row_dead_letter(line, why, topic, offset), line)
                else:
                    good.append((offset, raw))
                    lines[offset] = line
            # preference events are decoded once, for the learner and the explainer's sample
            parsed = None if kind == "click" else parse_batch(st.kind, [raw for _, raw in good], learner.catalog,
                                                              settings.max_message_bytes, learner.click_expander)
            refused = set()
            for dl in learner.process_batch(st, [(off, raw, None, None) for off, raw in good], parsed):
                refused.add(dl["offset"])
                dead_letter(dl, lines.get(dl["offset"]))
            refits.poll()  # install the refits that finished meanwhile (the worker's event loop does it)
            if learner.snapshot_due(st):
                publish()
            # a refused record is not explained: no model learned it the way it came (issue 31)
            if parsed is None:
                jobs = [explainer.on_click(raw) for off, raw in good if off not in refused]
            else:
                jobs = [explainer.offer(r[0]) for (off, _raw), r in zip(good, parsed)
                        if not isinstance(r, DeadLetter) and off not in refused]
            jobs = [job for job in jobs if job is not None]
            sampled += sum(len(job.examples) for job in jobs)
            if jobs and (st.since_snapshot > 0 or st.force) and any(m not in explainer.parts for m in st.slots):
                publish()  # a model not published yet: snapshot now rather than skip the events (short files)
            for job in _explain_jobs(jobs, EXPLAIN_BATCH_MAX):
                plan = explainer.plan(job)
                if not plan:
                    continue
                for rec in explainer.explain(job, plan):
                    fo.write(json.dumps(rec) + "\n")
                    all_records.append(rec)
                    res.explanations[rec["method"]] = res.explanations.get(rec["method"], 0) + 1
                    res.latency_ms.setdefault(rec["method"], []).append(1e3 * float(rec.get("compute_time_s", 0.0)))
            curve_points()
            bar.update(len(chunk))
        bar.close()
        res.learn_seconds = time.perf_counter() - t0
        refits.drain(st)
        if st.since_snapshot > 0 or st.force:
            publish()
    final_points()
    res.tally = {m: dict(t) for m, t in learner.tally.items()}
    res.duplicates = max((t["duplicates"] for t in res.tally.values()), default=0)
    for name, slot in st.slots.items():
        res.learners[name] = slot.learner
        res.learned[name] = slot.count
        res.final[name] = progressive_values(*learner.progressive[name])
        if slot.count == 0:
            res.final[name] = {k: None for k in res.final[name]}
    res.refits = int(sum(getattr(s.learner, "model_version", 0) or 0 for s in st.slots.values()
                         if hasattr(s.learner, "refit")))
    res.seconds = time.perf_counter() - t0
    drift = learner.monitor.alarms + explainer.monitor.alarms  # drift.v1 records (stream.monitoring.monitor)
    if drift:
        with open(out.with_name(out.stem + ".drift.jsonl"), "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(r) + "\n" for r in drift)
    res.dead_letters_file = str(dead_path)
    if res.records == 0:
        log.warning("no records in %s", inp)
    why = refusal_summary(res)
    idle = nothing_learned(res)
    if res.records and idle and len(idle) == len(res.learned):  # one line, not one per model
        log.warning("no model learned any record: %s", why)
    elif res.records:
        for name in idle:
            log.warning("model %r learned no event: %s", name, why)
    for name, n in res.learned.items():
        if n and res.final[name].get("accuracy") is None and not inline_refits and hasattr(res.learners[name], "refit"):
            log.warning("model %r scored and explained none of the %d events: its first fit ran in the background "
                        "and finished after the last event; `prefstream run --inline-refits` fits where each refit "
                        "is triggered (slower, reproducible)", name, n)
    if not res.explanations and res.records and any(res.learned.values()):  # (else: said just above)
        if not sampled:
            log.warning("no explanation was produced: no event was sampled for explanation; raise --sample-rate "
                        "(now %s)", settings.explain_sample_rate)
        else:
            log.warning("no explanation was produced: the %d sampled events were not explained (see the lines "
                        "above: a model not fitted yet, or an explainer that failed)", sampled)
    if report_dir is not None:
        from stream.report import write_report

        rd = Path(report_dir)
        rd.mkdir(parents=True, exist_ok=True)
        with open(rd / "records.jsonl", "w", encoding="utf-8") as fh:  # `prefstream report` rebuilds from it
            for rec in all_records:
                fh.write(json.dumps(rec) + "\n")
        write_report(rd, {"input": str(inp), **res.summary()}, all_records)
    return res


def refusal_summary(res: BatchResult) -> str:
    """Why records were refused, in one clause: counts by reason, the first detail, the file.

    Examples
    --------
    >>> r = BatchResult(records=3, dead_letters=3, dead_letter_reasons={"schema_violation": 3},
    ...                 dead_letters_file="out.dead-letters.jsonl",
    ...                 dead_letter_examples={"schema_violation": "line 1: missing feature 'b'"})
    >>> refusal_summary(r)
    "3 of 3 records refused (schema_violation: 3; first: line 1: missing feature 'b'); dead letters in out.dead-letters.jsonl"
    """
    if not res.records:
        return "the input holds no record"
    if not res.dead_letters:
        return f"no record was refused; see the log above (dead letters in {res.dead_letters_file})"
    counts = ", ".join(f"{k}: {v}" for k, v in sorted(res.dead_letter_reasons.items(), key=lambda kv: -kv[1]))
    top = max(res.dead_letter_reasons, key=res.dead_letter_reasons.get)
    first = res.dead_letter_examples.get(top, "")
    return (f"{res.dead_letters} of {res.records} records refused ({counts}; first: {first}); "
            f"dead letters in {res.dead_letters_file}")


def nothing_learned(res: BatchResult) -> list[str]:
    """The models of a run that learned no record (``prefstream run`` then exits with
    :data:`EXIT_NOTHING_LEARNED`)."""
    return [m for m, n in res.learned.items() if not n]


class _Refits:
    """Where :func:`run_batch`'s refits run: inline, or on the worker's executors (:mod:`stream.workers.refits`)
    with an event loop that :meth:`poll` turns between batches to install finished refits."""

    def __init__(self, settings, inline: bool):
        self.loop = self.executor = self.pool = None
        if not inline:
            from stream.workers.refits import refit_executors

            self.loop = asyncio.new_event_loop()
            self.executor, self.pool = refit_executors(settings)

    def core_kwargs(self) -> dict:
        return {"loop": self.loop, "executor": self.executor, "refit_pool": self.pool}

    def poll(self) -> None:
        if self.loop is not None:
            self.loop.run_until_complete(asyncio.sleep(0))

    def drain(self, st) -> None:
        """Wait until no refit of ``st``'s models is in flight (each finishes or fails, then installs)."""
        while self.loop is not None and any(slot.refit_running for slot in st.slots.values()):
            self.loop.run_until_complete(asyncio.sleep(0.05))

    def __enter__(self) -> "_Refits":
        return self

    def __exit__(self, *exc) -> None:
        if self.loop is not None:
            from stream.workers.refits import shutdown_executors

            shutdown_executors(self.executor, self.pool)
            self.loop.close()


def _micro_batches(records: Iterator[tuple[int, bytes | None, str | None]],
                   size: int) -> Iterator[list[tuple[int, int, bytes | None, str | None]]]:
    """``(offset, line, raw, why)`` lists of at most ``size`` records of :func:`_raw_records`; the
    offset is the record's index in the file."""
    chunk: list = []
    for offset, (line, raw, why) in enumerate(records):
        chunk.append((offset, line, raw, why))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _explain_jobs(jobs: list, size: int) -> Iterator:
    """Sampled preference jobs merged into jobs of at most ``size`` events; session jobs as they are."""
    from stream.workers.explainer import ExplainJob

    pending: list = []
    for job in jobs:
        if job.session or job.models is not None or job.methods is not None or job.params:
            yield job
            continue
        pending.extend(job.examples)
        while len(pending) >= size:
            yield ExplainJob(pending[:size], origin=job.origin)
            pending = pending[size:]
    if pending:
        yield ExplainJob(pending, origin="sample")
