"""Every Prometheus metric of the prefstream workers, built in one place.

:func:`build_metrics` creates all metrics on one :class:`prometheus_client.CollectorRegistry`
under one prefix (``prefstream`` by default) and returns them as attributes of a small
:class:`Metrics` object, the way ``faust/sensors/prometheus.py`` does for Faust's own
metrics. Workers never create metrics elsewhere, so this module is the complete list:

===============================================  =========  ====================  =====================================
name                                             type       labels                meaning
===============================================  =========  ====================  =====================================
``prefstream_events_consumed_total``             counter    topic                 input messages read (valid or not)
``prefstream_events_learned_total``              counter    model                 examples folded into a model (once each)
``prefstream_events_relearned_total``            counter    model                 examples learned again after a restore
``prefstream_dead_letters_total``                counter    reason                messages sent to the dead-letter topic
``prefstream_duplicate_events_total``            counter    topic                 examples skipped by the event_id window
``prefstream_learn_latency_seconds``             histogram  model                 an event's arrival → learned (µs–s buckets)
``prefstream_model_version``                     gauge      model                 latest published/loaded snapshot version
``prefstream_progressive_accuracy``              gauge      model                 predict-then-learn accuracy
``prefstream_progressive_log_loss``              gauge      model                 predict-then-learn log loss (nats)
``prefstream_progressive_roc_auc``               gauge      model                 predict-then-learn ROC AUC
``prefstream_explanations_total``                counter    method                explanation records emitted
``prefstream_explanation_latency_seconds``       histogram  method                one explainer call (ms–s buckets)
``prefstream_explanations_skipped_total``        counter    reason                events/requests not explained
``prefstream_explain_eligible_total``            counter    model, method         events a method could explain (sampled
                                                                                  or not; the fraction's denominator)
``prefstream_explained_events_total``            counter    model, method         sampled events explained (delivered)
``prefstream_explain_fraction_achieved``         gauge      model, method         explained / eligible, last 60 s
``prefstream_explain_fraction_requested``        gauge                            ``explain_sample_rate``
``prefstream_explanation_lag_seconds``           histogram  method                event arrival → explanation delivered
``prefstream_explanations_shed_total``           counter    method, reason,       sampled events not explained by a
                                                            error                 method (backlog, stale, duplicate,
                                                                                  no_model, error + exception class)
``prefstream_refit_duration_seconds``            histogram  model                 one ``refit()`` (s–min buckets)
``prefstream_refit_failures_total``              counter    model                 refits that raised (learning goes on)
``prefstream_refit_training_size``               gauge      model                 examples used by the last refit
``prefstream_refit_validation_auc``              gauge      model                 validation AUC of the last refit
``prefstream_consumer_lag``                      gauge      topic, partition      high watermark − next offset
``prefstream_partition_stall_seconds``           gauge      topic, partition      seconds since the processed offset last
                                                                                  moved or lag was 0, while lag > 0
``prefstream_input_errors_total``                counter    topic, reason         corrupt/undecodable input records
                                                                                  skipped by offset (stream.workers.loop)
``prefstream_capacity_nonzero_masses``           gauge      model                 non-zero Möbius masses of a capacity
``prefstream_capacity_constraint_violation``     gauge      model                 monotonicity/normalisation violation
``prefstream_capacity_regret_proxy``             gauge      model                 RDA regret proxy of the capacity learner
``prefstream_global_mean_phi``                   gauge      model, method,        window mean φ (top-K features +
                                                            feature               ``other``; :mod:`stream.monitoring.monitor`)
``prefstream_global_mean_abs_phi``               gauge      model, method,        window mean |φ| (top-K + ``other``)
                                                            feature
``prefstream_global_importance_ndcg``            gauge      model, method         nDCG@K of the window's importance
                                                                                  ranking vs the reference window
``prefstream_capacity_shapley``                  gauge      model, feature        capacity Shapley index per snapshot
``prefstream_capacity_interaction``              gauge      model, pair           top-K interaction indices per snapshot
``prefstream_drift_total``                       counter    model, kind           drift alarms (model/ranking/feature)
``prefstream_model_swaps_total``                 counter    model                 merged versions swapped in (live models)
``prefstream_model_load_failures_total``         counter    model                 snapshots that failed to load (skipped)
``prefstream_model_snapshot_age_seconds``        gauge      model                 now − newest loaded snapshot's created_at
``prefstream_serve_requests_total``              counter    endpoint, status      HTTP requests answered by prefstream serve
``prefstream_serve_request_latency_seconds``     histogram  endpoint              one HTTP request, received → answered
``prefstream_people_held``                       gauge      model                 people of a personal model in memory
``prefstream_predictions_total``                 counter    model, personalized   predictions of a personal model, by
                                                                                  whether the person was held (true/false)
``prefstream_people_changelog_lag``              gauge      model                 people whose latest state is not yet on
                                                                                  the changelog (learned since the round)
``prefstream_people_changelog_records_total``    counter    model, kind           changelog records delivered (state or
                                                                                  tombstone)
``prefstream_people_restored_total``             counter    model                 person records restored from the changelog
``prefstream_people_evicted_total``              counter    model                 people evicted from memory (TTL, budget)
``prefstream_people_forgotten_total``            counter    model                 people forgotten (forget records)
===============================================  =========  ====================  =====================================

Histogram buckets, in seconds, chosen for what each one times:

* :data:`LEARN_BUCKETS` — the learner works in micro-batches, so each learned event observes
  its own latency from arrival at the worker to the end of its batch's ``learn_many`` (a batch
  of n events adds n observations; see docs/workers.md): a few ms at the default batch settings,
  up to ``batch_max_ms`` plus the batch's work. Buckets run from 5 µs to 60 s so that the
  100 ms goal, a slow batch, and a worker catching up on a full topic (an event waits behind
  the earlier batches of its fetch: hundreds of ms to seconds, ``bench/catchup.py``) all fall
  inside finite buckets.
* :data:`EXPLAIN_BUCKETS` — one explanation: closed-form linear Shapley is ~50 µs,
  Pref-SHAP / ShaRP with sampling tens of ms to seconds; 100 µs to 30 s.
* :data:`SERVE_BUCKETS` — one HTTP request of ``prefstream serve``: a rank by id is ~1 ms, an
  explanation up to the 2 s deadline; 250 µs to 5 s.
* :data:`REFIT_BUCKETS` — a batch refit (GPM with Nyström/Falkon) takes seconds to minutes;
  0.5 s to 30 min.

Each worker serves its registry with :func:`start_metrics_server` on ``127.0.0.1`` (port from
``Settings.port_for(role)``; ``0``/``None`` disables the endpoint).

Examples
--------
>>> from prometheus_client import CollectorRegistry, generate_latest
>>> m = build_metrics(CollectorRegistry())
>>> m.events_learned.labels(model="linear-bt").inc()
>>> b"prefstream_events_learned_total{model=\\"linear-bt\\"} 1.0" in generate_latest(m.registry)
True
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from learners.exceptions import InvalidParameterError

__all__ = [
    "EXPLAIN_BUCKETS",
    "LAG_BUCKETS",
    "LEARN_BUCKETS",
    "METRIC_NAMES",
    "METRIC_TYPES",
    "Metrics",
    "MetricsPortError",
    "REFIT_BUCKETS",
    "SERVE_BUCKETS",
    "build_metrics",
    "start_metrics_server",
]

#: arrival → learned latency buckets (seconds): 5 µs … 60 s (catch-up on a full topic included).
LEARN_BUCKETS = (5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5,
                 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: explanation latency buckets (seconds): 100 µs … 30 s.
EXPLAIN_BUCKETS = (1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0, 5.0, 30.0)
#: explanation lag buckets (seconds): 10 ms … 2 min (arrival → delivered, queueing included).
LAG_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: HTTP request latency buckets of prefstream serve (seconds): 250 µs … 5 s.
SERVE_BUCKETS = (2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0)
#: refit duration buckets (seconds): 0.5 s … 30 min.
REFIT_BUCKETS = (0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)

#: Full name (as exposed, counters with ``_total``) -> Prometheus type of every metric built here:
#: the one list the Grafana dashboard (deploy/grafana/build_dashboard.py) and the tests read.
METRIC_TYPES = {
    "prefstream_events_consumed_total": "counter",
    "prefstream_events_learned_total": "counter",
    "prefstream_events_relearned_total": "counter",
    "prefstream_dead_letters_total": "counter",
    "prefstream_duplicate_events_total": "counter",
    "prefstream_learn_latency_seconds": "histogram",
    "prefstream_model_version": "gauge",
    "prefstream_progressive_accuracy": "gauge",
    "prefstream_progressive_log_loss": "gauge",
    "prefstream_progressive_roc_auc": "gauge",
    "prefstream_explanations_total": "counter",
    "prefstream_explanation_latency_seconds": "histogram",
    "prefstream_explanations_skipped_total": "counter",
    "prefstream_explain_eligible_total": "counter",
    "prefstream_explained_events_total": "counter",
    "prefstream_explain_fraction_achieved": "gauge",
    "prefstream_explain_fraction_requested": "gauge",
    "prefstream_explanation_lag_seconds": "histogram",
    "prefstream_explanations_shed_total": "counter",
    "prefstream_refit_duration_seconds": "histogram",
    "prefstream_refit_failures_total": "counter",
    "prefstream_refit_training_size": "gauge",
    "prefstream_refit_validation_auc": "gauge",
    "prefstream_consumer_lag": "gauge",
    "prefstream_partition_stall_seconds": "gauge",
    "prefstream_input_errors_total": "counter",
    "prefstream_capacity_nonzero_masses": "gauge",
    "prefstream_capacity_constraint_violation": "gauge",
    "prefstream_capacity_regret_proxy": "gauge",
    "prefstream_global_mean_phi": "gauge",
    "prefstream_global_mean_abs_phi": "gauge",
    "prefstream_global_importance_ndcg": "gauge",
    "prefstream_capacity_shapley": "gauge",
    "prefstream_capacity_interaction": "gauge",
    "prefstream_drift_total": "counter",
    "prefstream_model_swaps_total": "counter",
    "prefstream_model_load_failures_total": "counter",
    "prefstream_model_snapshot_age_seconds": "gauge",
    "prefstream_serve_requests_total": "counter",
    "prefstream_serve_request_latency_seconds": "histogram",
    "prefstream_people_held": "gauge",
    "prefstream_predictions_total": "counter",
    "prefstream_people_changelog_lag": "gauge",
    "prefstream_people_changelog_records_total": "counter",
    "prefstream_people_restored_total": "counter",
    "prefstream_people_evicted_total": "counter",
    "prefstream_people_forgotten_total": "counter",
}
#: Full names of every metric built here (the keys of :data:`METRIC_TYPES`).
METRIC_NAMES = tuple(METRIC_TYPES)


@dataclass(frozen=True)
class Metrics:
    """The metrics of one worker process (see the module docstring for names and labels)."""

    registry: CollectorRegistry
    events_consumed: Counter
    events_learned: Counter
    events_relearned: Counter
    dead_letters: Counter
    duplicate_events: Counter
    learn_latency: Histogram
    model_version: Gauge
    progressive_accuracy: Gauge
    progressive_log_loss: Gauge
    progressive_roc_auc: Gauge
    explanations: Counter
    explanation_latency: Histogram
    explanations_skipped: Counter
    explain_eligible: Counter
    explained_events: Counter
    explain_fraction_achieved: Gauge
    explain_fraction_requested: Gauge
    explanation_lag: Histogram
    explanations_shed: Counter
    refit_duration: Histogram
    refit_failures: Counter
    refit_training_size: Gauge
    refit_validation_auc: Gauge
    consumer_lag: Gauge
    partition_stall_seconds: Gauge
    input_errors: Counter
    capacity_nonzero_masses: Gauge
    capacity_constraint_violation: Gauge
    capacity_regret_proxy: Gauge
    global_mean_phi: Gauge
    global_mean_abs_phi: Gauge
    global_importance_ndcg: Gauge
    capacity_shapley: Gauge
    capacity_interaction: Gauge
    drift: Counter
    model_swaps: Counter
    model_load_failures: Counter
    model_snapshot_age: Gauge
    serve_requests: Counter
    serve_latency: Histogram
    people_held: Gauge
    predictions: Counter
    people_changelog_lag: Gauge
    people_changelog_records: Counter
    people_restored: Counter
    people_evicted: Counter
    people_forgotten: Counter


def build_metrics(registry: CollectorRegistry | None = None, prefix: str = "prefstream") -> Metrics:
    """Create every prefstream metric on ``registry``.

    Parameters
    ----------
    registry : prometheus_client.CollectorRegistry, optional
        Where to register; a fresh registry if omitted (so tests and several workers in one
        process never collide on the global default registry).
    prefix : str, default "prefstream"
        Name prefix; the names in :data:`METRIC_NAMES` assume the default.

    Returns
    -------
    Metrics

    Raises
    ------
    InvalidParameterError
        If ``prefix`` is not a valid Prometheus name fragment.
    """
    if not isinstance(prefix, str) or not prefix.replace("_", "a").isalnum() or prefix[0].isdigit():
        raise InvalidParameterError(
            f"The 'prefix' parameter of build_metrics must be a Prometheus name such as 'prefstream'. Got {prefix!r} instead.")
    reg = CollectorRegistry() if registry is None else registry
    p = prefix

    def c(name, doc, labels):
        return Counter(f"{p}_{name}", doc, labels, registry=reg)

    def g(name, doc, labels):
        return Gauge(f"{p}_{name}", doc, labels, registry=reg)

    def h(name, doc, labels, buckets):
        return Histogram(f"{p}_{name}", doc, labels, buckets=buckets, registry=reg)

    return Metrics(
        registry=reg,
        events_consumed=c("events_consumed", "Input messages consumed, valid or not.", ["topic"]),
        events_learned=c("events_learned", "Preference examples folded into a model (each counted once per "
                         "process, also across restores).", ["model"]),
        events_relearned=c("events_relearned", "Examples learned again after a restore from a snapshot "
                           "(rebalance, restart, or a batch re-learned event by event).", ["model"]),
        dead_letters=c("dead_letters", "Messages sent to the dead-letter topic, by machine-readable reason.", ["reason"]),
        duplicate_events=c("duplicate_events", "Examples skipped because their event_id was seen in the dedupe window.",
                           ["topic"]),
        learn_latency=h("learn_latency_seconds", "Seconds per learn_one call (predict + learn excluded: learn only).",
                        ["model"], LEARN_BUCKETS),
        model_version=g("model_version", "Version of the latest snapshot published (learner) or loaded (explainer).",
                        ["model"]),
        progressive_accuracy=g("progressive_accuracy", "Progressive-validation accuracy (predict before learn).",
                               ["model"]),
        progressive_log_loss=g("progressive_log_loss", "Progressive-validation log loss in nats (predict before learn).",
                               ["model"]),
        progressive_roc_auc=g("progressive_roc_auc", "Progressive-validation ROC AUC (predict before learn).", ["model"]),
        explanations=c("explanations", "Explanation records emitted.", ["method"]),
        explanation_latency=h("explanation_latency_seconds", "Seconds per explainer call.", ["method"],
                              EXPLAIN_BUCKETS),
        explanations_skipped=c("explanations_skipped", "Events or requests not explained, by reason.", ["reason"]),
        explain_eligible=c("explain_eligible", "Events a method could explain (its model has a snapshot), sampled or "
                           "not: the denominator of the achieved explained fraction.", ["model", "method"]),
        explained_events=c("explained_events", "Sampled events explained by a method (records delivered).",
                           ["model", "method"]),
        explain_fraction_achieved=g("explain_fraction_achieved", "Explained / eligible events of a method over the "
                                    "last 60 s (compare with prefstream_explain_fraction_requested).",
                                    ["model", "method"]),
        explain_fraction_requested=g("explain_fraction_requested", "The requested explained fraction "
                                     "(explain_sample_rate).", []),
        explanation_lag=h("explanation_lag_seconds", "Seconds from a sampled event's arrival at the explainer to its "
                          "explanation record's delivery.", ["method"], LAG_BUCKETS),
        explanations_shed=c("explanations_shed", "Sampled events a method did not explain, by reason (backlog: its "
                            "queue was full; stale: queued past explain_max_lag_s; duplicate: already explained at "
                            "this model version; no_model; error, with the exception class in error).",
                            ["method", "reason", "error"]),
        refit_duration=h("refit_duration_seconds", "Seconds per batch refit (run in an executor thread).", ["model"],
                         REFIT_BUCKETS),
        refit_failures=c("refit_failures", "Batch refits that raised (the model keeps learning online).", ["model"]),
        refit_training_size=g("refit_training_size", "Training examples used by the latest refit.", ["model"]),
        refit_validation_auc=g("refit_validation_auc", "Validation ROC AUC reported by the latest refit.", ["model"]),
        consumer_lag=g("consumer_lag", "High watermark minus next offset to process.", ["topic", "partition"]),
        partition_stall_seconds=g("partition_stall_seconds", "Seconds since the partition's processed offset last "
                                  "moved or its lag was last 0, while its lag is > 0 (0 when caught up): a stalled "
                                  "partition grows here.",
                                  ["topic", "partition"]),
        input_errors=c("input_errors", "Corrupt or undecodable input records (CRC error, unknown codec) skipped by "
                       "offset, by topic and reason.", ["topic", "reason"]),
        capacity_nonzero_masses=g("capacity_nonzero_masses", "Non-zero Möbius masses of the capacity model.",
                                  ["model"]),
        capacity_constraint_violation=g("capacity_constraint_violation",
                                        "Largest violation of the capacity's monotonicity/normalisation constraints.",
                                        ["model"]),
        capacity_regret_proxy=g("capacity_regret_proxy", "Regret proxy reported by the capacity learner.", ["model"]),
        global_mean_phi=g("global_mean_phi", "Mean attribution over the monitor's sliding window of explanations "
                          "(top-K features by mean |phi|, the rest summed as feature=other).",
                          ["model", "method", "feature"]),
        global_mean_abs_phi=g("global_mean_abs_phi", "Mean |attribution| (global importance) over the sliding window "
                              "(top-K features, the rest as feature=other).", ["model", "method", "feature"]),
        global_importance_ndcg=g("global_importance_ndcg", "nDCG@K of the window's importance ranking against the "
                                 "reference window's (1 = same ranking).", ["model", "method"]),
        capacity_shapley=g("capacity_shapley", "Shapley importance of each criterion in the latest capacity snapshot "
                           "(top-K, the rest as feature=other).", ["model", "feature"]),
        capacity_interaction=g("capacity_interaction", "Shapley interaction index of the top-K criterion pairs "
                               "(by |I|) in the latest capacity snapshot.", ["model", "pair"]),
        drift=c("drift", "Drift alarms: kind=model (ADWIN on the progressive log loss), ranking (nDCG of the "
                "importance ranking) or feature (ADWIN on a feature's share of |phi|).", ["model", "kind"]),
        model_swaps=c("model_swaps", "Merged model versions swapped in by a live-model store (explainer, serve).",
                      ["model"]),
        model_load_failures=c("model_load_failures", "Model snapshots that failed to decode, load or merge; the "
                              "previous version keeps serving.", ["model"]),
        model_snapshot_age=g("model_snapshot_age_seconds", "Seconds since the newest loaded snapshot of the model was "
                             "written (set at each scrape).", ["model"]),
        serve_requests=c("serve_requests", "HTTP requests answered by prefstream serve.", ["endpoint", "status"]),
        serve_latency=h("serve_request_latency_seconds", "Seconds per HTTP request of prefstream serve (received to "
                        "answered).", ["endpoint"], SERVE_BUCKETS),
        people_held=g("people_held", "People of a personal model held in memory (the rest are in the store and the "
                      "changelog).", ["model"]),
        predictions=c("predictions", "Predictions of a personal model, by whether the person was held with a learned "
                      "deviation (personalized=true) or scored by the population (false).", ["model", "personalized"]),
        people_changelog_lag=g("people_changelog_lag", "People whose latest learned state is not yet on the "
                               "prefstream.people changelog (written at the next snapshot round).", ["model"]),
        people_changelog_records=c("people_changelog_records", "Records delivered to the prefstream.people changelog: "
                                   "kind=state (a person's state) or tombstone (a forgotten person).", ["model", "kind"]),
        people_restored=c("people_restored", "Person records restored from the changelog into the worker's store on "
                          "an assignment.", ["model"]),
        people_evicted=c("people_evicted", "People evicted from memory (idle past people_ttl_seconds or beyond "
                         "people_memory_bytes); they come back from the store on their next event.", ["model"]),
        people_forgotten=c("people_forgotten", "People forgotten by a forget record (state, store entry and "
                           "changelog record removed).", ["model"]),
    )


class MetricsPortError(InvalidParameterError, OSError):
    """The metrics port cannot be bound (taken, or not allowed): a user's choice to change, not a crash."""


def start_metrics_server(port: int | None, registry: CollectorRegistry, addr: str = "127.0.0.1"):
    """Serve ``registry`` at ``http://addr:port/metrics`` from a daemon thread.

    Parameters
    ----------
    port : int or None
        TCP port; ``0`` or ``None`` disables the endpoint.
    registry : CollectorRegistry
    addr : str, default "127.0.0.1"

    Returns
    -------
    int or None
        The bound port, or ``None`` when disabled.

    Raises
    ------
    MetricsPortError
        (an ``OSError``) If the port is taken (the message names the setting to change).
    """
    if not port:
        return None
    from prometheus_client import start_http_server

    try:
        start_http_server(int(port), addr=addr, registry=registry)
    except OSError as exc:
        raise MetricsPortError(f"Cannot serve metrics on {addr}:{port}: {exc}. Pick another port with --metrics-port "
                      "(PREFSTREAM_METRICS_PORT) or 0 to disable.") from None
    return int(port)
