"""Generate deploy/grafana/prefstream-dashboard.json (run: python deploy/grafana/build_dashboard.py).

The dashboard shows exactly the prefstream worker metrics of ``stream.metrics.METRIC_TYPES``
(the one list; ``stream/metrics.py`` creates them): every metric there must get a panel here or
:func:`build` raises. tests/test_prometheus.py checks that the committed JSON equals this
script's output, uses no other metric, and that every panel's query returns a series from a real
Prometheus scraping real workers.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).with_name("prefstream-dashboard.json")
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from stream.metrics import METRIC_TYPES  # noqa: E402

#: metric -> type, as exposed (counters with _total): stream.metrics' list, not a copy
METRICS = dict(METRIC_TYPES)

DS = {"type": "prometheus", "uid": "${datasource}"}
M = 'model=~"$model"'
MM = 'model=~"$model", method=~"$method"'
RI = "$__rate_interval"


def target(expr: str, legend: str, ref: str) -> dict:
    return {"datasource": DS, "expr": expr, "legendFormat": legend, "refId": ref, "range": True}


def quantiles(metric: str, label: str, selector: str = "") -> list[dict]:
    sel = "{" + selector + "}" if selector else ""
    return [
        target(
            f"histogram_quantile({q}, sum by (le, {label}) (rate({metric}_bucket{sel}[{RI}])))",
            f"p{int(q * 100)} {{{{{label}}}}}",
            ref,
        )
        for q, ref in ((0.5, "A"), (0.99, "B"))
    ]


class Layout:
    def __init__(self) -> None:
        self.panels: list[dict] = []
        self.y = 0
        self.x = 0
        self.next_id = 1

    def row(self, title: str) -> None:
        if self.x:
            self.y += 8
            self.x = 0
        self.panels.append({"type": "row", "title": title, "id": self.next_id, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1

    def panel(self, title: str, targets: list[dict], unit: str = "short", kind: str = "timeseries",
              description: str = "", w: int = 8, minv=None, maxv=None) -> None:
        if self.x + w > 24:
            self.y += 8
            self.x = 0
        defaults: dict = {"unit": unit}
        if minv is not None:
            defaults["min"] = minv
        if maxv is not None:
            defaults["max"] = maxv
        p = {
            "type": kind,
            "title": title,
            "description": description,
            "id": self.next_id,
            "datasource": DS,
            "gridPos": {"h": 8, "w": w, "x": self.x, "y": self.y},
            "targets": targets,
            "fieldConfig": {"defaults": defaults, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                        "tooltip": {"mode": "multi", "sort": "none"}}
            if kind == "timeseries" else {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                                          "colorMode": "value", "graphMode": "area", "textMode": "auto"},
        }
        self.panels.append(p)
        self.next_id += 1
        self.x += w


def build() -> dict:
    L = Layout()
    L.row("Ingest")
    L.panel("Events consumed / s by topic",
            [target(f"sum by (topic) (rate(prefstream_events_consumed_total[{RI}]))", "{{topic}}", "A")],
            "ops", description="Input messages read (valid or not): prefstream_events_consumed_total.")
    L.panel("Dead letters / s by reason",
            [target(f"sum by (reason) (rate(prefstream_dead_letters_total[{RI}]))", "{{reason}}", "A")],
            "ops", description="Messages routed to prefstream.dead-letters: prefstream_dead_letters_total.")
    L.panel("Duplicates skipped / s by topic",
            [target(f"sum by (topic) (rate(prefstream_duplicate_events_total[{RI}]))", "{{topic}}", "A")],
            "ops", description="Examples skipped by the event_id dedupe window: prefstream_duplicate_events_total.")
    L.panel("Consumer lag by topic/partition",
            [target("sum by (topic, partition) (prefstream_consumer_lag)", "{{topic}}[{{partition}}]", "A")],
            "short", description="High watermark minus next offset: prefstream_consumer_lag.", minv=0)
    L.panel("Partition stall (s since the processed offset moved, lag > 0)",
            [target("max by (topic, partition) (prefstream_partition_stall_seconds)", "{{topic}}[{{partition}}]", "A")],
            "s", minv=0, description="prefstream_partition_stall_seconds: grows while a partition has lag but its "
                                     "processed offset does not move (alert PrefstreamPartitionStalled); 0 when caught up.")
    L.panel("Corrupt input skipped / s by topic, reason",
            [target(f"sum by (topic, reason) (rate(prefstream_input_errors_total[{RI}]))", "{{topic}} {{reason}}", "A")],
            "ops", description="Corrupt (CRC) or undecodable records skipped by offset by the consumer loop: "
                               "prefstream_input_errors_total.")

    L.row("Online learning")
    L.panel("Events learned / s by model (and re-learned after a restore)",
            [target(f"sum by (model) (rate(prefstream_events_learned_total{{{M}}}[{RI}]))", "{{model}}", "A"),
             target(f"sum by (model) (rate(prefstream_events_relearned_total{{{M}}}[{RI}]))", "{{model}} re-learned", "B")],
            "ops", description="prefstream_events_learned_total (each event once) and "
                               "prefstream_events_relearned_total (learned again after a restore from a snapshot).")
    L.panel("Arrival → learned latency (p50, p99)", quantiles("prefstream_learn_latency_seconds", "model", M),
            "s", description="prefstream_learn_latency_seconds histogram: per event, from its arrival at the worker "
                             "to the end of the micro-batch that learned it.")
    L.panel("Model version", [target(f"max by (model) (prefstream_model_version{{{M}}})", "{{model}}", "A")],
            "none", kind="stat", description="Latest published/loaded snapshot: prefstream_model_version.")
    L.panel("Progressive accuracy",
            [target(f"max by (model) (prefstream_progressive_accuracy{{{M}}})", "{{model}}", "A")],
            "percentunit", minv=0, maxv=1, description="Predict-then-learn accuracy: prefstream_progressive_accuracy.")
    L.panel("Progressive log loss",
            [target(f"max by (model) (prefstream_progressive_log_loss{{{M}}})", "{{model}}", "A")],
            "none", minv=0, description="Predict-then-learn log loss (nats): prefstream_progressive_log_loss.")
    L.panel("Progressive ROC AUC",
            [target(f"max by (model) (prefstream_progressive_roc_auc{{{M}}})", "{{model}}", "A")],
            "none", minv=0, maxv=1, description="Predict-then-learn ROC AUC: prefstream_progressive_roc_auc.")

    L.row("Batch refit (GPM)")
    L.panel("Refit duration (p50, p99)", quantiles("prefstream_refit_duration_seconds", "model", M),
            "s", description="prefstream_refit_duration_seconds histogram.")
    L.panel("Refit failures / s",
            [target(f"sum by (model) (rate(prefstream_refit_failures_total{{{M}}}[{RI}]))", "{{model}}", "A")],
            "ops", description="Refits that raised (online learning goes on): prefstream_refit_failures_total.")
    L.panel("Refit training size",
            [target(f"max by (model) (prefstream_refit_training_size{{{M}}})", "{{model}}", "A")],
            "short", minv=0, description="prefstream_refit_training_size.")
    L.panel("Refit validation AUC",
            [target(f"max by (model) (prefstream_refit_validation_auc{{{M}}})", "{{model}}", "A")],
            "none", minv=0, maxv=1, description="prefstream_refit_validation_auc.")

    L.row("Explanations")
    L.panel("Explanations / s by method",
            [target(f"sum by (method) (rate(prefstream_explanations_total[{RI}]))", "{{method}}", "A")],
            "ops", description="prefstream_explanations_total.")
    L.panel("Explanation latency (p50, p99)", quantiles("prefstream_explanation_latency_seconds", "method"),
            "s", description="prefstream_explanation_latency_seconds histogram.")
    L.panel("Explanations skipped / s by reason",
            [target(f"sum by (reason) (rate(prefstream_explanations_skipped_total[{RI}]))", "{{reason}}", "A")],
            "ops", description="prefstream_explanations_skipped_total.")
    L.panel("Explained fraction: achieved vs requested",
            [target(f"sum by (model, method) (rate(prefstream_explained_events_total{{{MM}}}[{RI}])) / clamp_min("
                    f"sum by (model, method) (rate(prefstream_explain_eligible_total{{{MM}}}[{RI}])), 1e-9)",
                    "{{model}}/{{method}} achieved", "A"),
             target("max(prefstream_explain_fraction_requested)", "requested", "B"),
             target(f"max by (model, method) (prefstream_explain_fraction_achieved{{{MM}}})",
                    "{{model}}/{{method}} last 60 s (per process)", "C")],
            "percentunit", minv=0, description="Explained / eligible events per method (prefstream_explained_events_total "
            "over prefstream_explain_eligible_total, summed over explainer processes) against the requested "
            "explain_sample_rate (prefstream_explain_fraction_requested); alert PrefstreamExplainedFractionLow "
            "below half of it.")
    L.panel("Explanation lag, arrival → delivered (p50, p99)",
            quantiles("prefstream_explanation_lag_seconds", "method", 'method=~"$method"'),
            "s", description="prefstream_explanation_lag_seconds histogram: from a sampled event's arrival at the "
                             "explainer to its record's delivery, queueing included.")
    L.panel("Explanations shed / s by method and reason",
            [target(f"sum by (method, reason, error) (rate(prefstream_explanations_shed_total[{RI}]))",
                    "{{method}} {{reason}} {{error}}", "A")],
            "ops", description="Sampled events a method did not explain: backlog (its queue was full), stale, "
                               "duplicate, no_model, error (with the exception class): "
                               "prefstream_explanations_shed_total.")

    L.row("Global explanations (stream.monitoring.monitor: sliding window, top-K features + other)")
    L.panel("Global importance: window mean |φ| by feature",
            [target(f"max by (model, method, feature) (prefstream_global_mean_abs_phi{{{MM}}})",
                    "{{feature}} ({{method}}, {{model}})", "A")],
            "none", minv=0, w=12, description="Mean |attribution| over the last monitor_window explanations; the "
            "top monitor_top_k features by name, the rest summed as 'other': prefstream_global_mean_abs_phi.")
    L.panel("Global direction: window mean φ by feature",
            [target(f"max by (model, method, feature) (prefstream_global_mean_phi{{{MM}}})",
                    "{{feature}} ({{method}}, {{model}})", "A")],
            "none", w=12, description="Mean signed attribution over the window: prefstream_global_mean_phi.")
    L.panel("Capacity Shapley importance (latest snapshot)",
            [target(f"max by (model, feature) (prefstream_capacity_shapley{{{M}}})", "{{feature}} ({{model}})", "A")],
            "none", w=12, description="Shapley index of each criterion of the capacity: prefstream_capacity_shapley.")
    L.panel("Capacity interaction indices (top pairs)",
            [target(f"max by (model, pair) (prefstream_capacity_interaction{{{M}}})", "{{pair}} ({{model}})", "A")],
            "none", w=12, description="Shapley interaction index I_ij of the top pairs by |I|: "
            "prefstream_capacity_interaction.")

    L.row("Drift (alarms on prefstream.drift)")
    L.panel("Importance ranking nDCG vs reference window",
            [target(f"min by (model, method) (prefstream_global_importance_ndcg{{{MM}}})", "{{method}} ({{model}})", "A")],
            "none", minv=0, maxv=1, w=12, description="nDCG@K of the window's mean-|φ| ranking against the reference "
            "window; a ranking drift alarm fires below drift_ndcg_threshold (0.9): prefstream_global_importance_ndcg.")
    L.panel("Drift alarms by model and kind",
            [target(f"sum by (model, kind) (increase(prefstream_drift_total{{{M}}}[{RI}]))", "{{kind}} ({{model}})", "A")],
            "short", minv=0, w=12, description="Alarms of kind model (ADWIN on the log loss), ranking (nDCG) and "
            "feature (ADWIN on a feature's share of |φ|): prefstream_drift_total.")

    L.row("Capacity learner (Choquet, RDA / ADMM-RDA)")
    L.panel("Non-zero Möbius masses",
            [target(f"max by (model) (prefstream_capacity_nonzero_masses{{{M}}})", "{{model}}", "A")],
            "short", minv=0, description="prefstream_capacity_nonzero_masses.")
    L.panel("Capacity constraint violation",
            [target(f"max by (model) (prefstream_capacity_constraint_violation{{{M}}})", "{{model}}", "A")],
            "none", minv=0, description="prefstream_capacity_constraint_violation.")
    L.panel("Regret proxy",
            [target(f"max by (model) (prefstream_capacity_regret_proxy{{{M}}})", "{{model}}", "A")],
            "none", description="prefstream_capacity_regret_proxy.")

    L.row("People (personal models: memory, store, changelog prefstream.people)")
    L.panel("People held in memory",
            [target(f"sum by (model) (prefstream_people_held{{{M}}})", "{{model}}", "A")],
            "short", minv=0, description="People of a personal model in the learners' memory, summed over workers "
            "(prefstream_people_held); the others are in each worker's store and on the changelog, and come back "
            "on their next event.")
    L.panel("Personalized share of predictions",
            [target(f'sum by (model) (rate(prefstream_predictions_total{{{M}, personalized="true"}}[{RI}])) / '
                    f"clamp_min(sum by (model) (rate(prefstream_predictions_total{{{M}}}[{RI}])), 1e-9)",
                    "{{model}}", "A")],
            "percentunit", minv=0, maxv=1, description="Predictions of a personal model made with the person's own "
            "deviation, over all its predictions (prefstream_predictions_total{personalized}); the rest were "
            "scored by the population (no user, a person never seen, or forgotten).")
    L.panel("Changelog lag (people not yet on prefstream.people)",
            [target(f"sum by (model) (prefstream_people_changelog_lag{{{M}}})", "{{model}}", "A")],
            "short", minv=0, description="People whose latest learned state (or forget) is not yet on the changelog: "
            "written by the next snapshot round, before the offsets are committed "
            "(prefstream_people_changelog_lag).")
    L.panel("Changelog records / s (states, tombstones)",
            [target(f"sum by (model, kind) (rate(prefstream_people_changelog_records_total{{{M}}}[{RI}]))",
                    "{{model}} {{kind}}", "A")],
            "ops", description="Records delivered to prefstream.people: states of the people touched per round, "
            "tombstones of forgotten people (prefstream_people_changelog_records_total).")
    L.panel("People evicted, restored and forgotten / s",
            [target(f"sum by (model) (rate(prefstream_people_evicted_total{{{M}}}[{RI}]))", "{{model}} evicted", "A"),
             target(f"sum by (model) (rate(prefstream_people_restored_total{{{M}}}[{RI}]))", "{{model}} restored", "B"),
             target(f"sum by (model) (rate(prefstream_people_forgotten_total{{{M}}}[{RI}]))", "{{model}} forgotten",
                    "C")],
            "ops", w=16, description="Evicted from memory past people_ttl_seconds or people_memory_bytes "
            "(prefstream_people_evicted_total), restored from the changelog on an assignment "
            "(prefstream_people_restored_total), forgotten by prefstream forget (prefstream_people_forgotten_total).")

    L.row("Serve (prefstream serve: HTTP rank / compare / explain on the live models)")
    L.panel("HTTP requests / s by endpoint and status",
            [target(f"sum by (endpoint, status) (rate(prefstream_serve_requests_total[{RI}]))",
                    "{{endpoint}} {{status}}", "A")],
            "reqps", description="Requests answered by prefstream serve: prefstream_serve_requests_total "
            "(4xx: refused input, 504: explanation past the deadline).")
    L.panel("HTTP latency (p50, p99) by endpoint", quantiles("prefstream_serve_request_latency_seconds", "endpoint"),
            "s", description="prefstream_serve_request_latency_seconds histogram: received to answered.")
    L.panel("Served model snapshot age",
            [target(f"max by (model) (prefstream_model_snapshot_age_seconds{{{M}}})", "{{model}}", "A")],
            "s", minv=0, description="Seconds since the newest snapshot the server loaded was written "
            "(alert PrefstreamServedModelStale above 15 min): prefstream_model_snapshot_age_seconds.")
    L.panel("Model swaps / s and snapshots that failed to load",
            [target(f"sum by (model) (rate(prefstream_model_swaps_total{{{M}}}[{RI}]))", "{{model}} swaps", "A"),
             target(f"sum by (model) (rate(prefstream_model_load_failures_total{{{M}}}[{RI}]))", "{{model}} load failures",
                    "B")],
            "ops", w=16, description="Merged versions swapped in (prefstream_model_swaps_total) and snapshots that "
            "failed to decode, load or merge, the previous version serving on (prefstream_model_load_failures_total).")

    used = {m for p in L.panels for t in p.get("targets", []) for m in re.findall(r"\bprefstream_[a-z0-9_]+", t["expr"])}
    used = {re.sub(r"_(bucket|sum|count)$", "", m) if METRICS.get(re.sub(r"_(bucket|sum|count)$", "", m)) == "histogram"
            else m for m in used}
    if set(METRICS) - used:
        raise SystemExit(f"metrics of stream.metrics without a panel: {sorted(set(METRICS) - used)}")
    return {
        "__inputs": [],
        "annotations": {"list": [
            {"name": "Drift alarms", "datasource": DS, "enable": True, "iconColor": "red",
             "expr": f"sum by (model, kind) (changes(prefstream_drift_total{{{M}}}[1m])) > 0",
             "step": "1m", "titleFormat": "{{kind}} drift", "textFormat": "{{model}}", "tagKeys": "model,kind"},
        ]},
        "description": "prefstream learner and explainer workers and prefstream serve (deploy/prometheus/prometheus.yml "
                       "scrapes them)",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "panels": L.panels,
        "refresh": "10s",
        "schemaVersion": 39,
        "tags": ["prefstream", "kafka", "online-learning"],
        "templating": {"list": [
            {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1, "regex": "", "options": []},
            {"name": "model", "label": "model", "type": "query", "datasource": DS,
             "definition": "label_values(prefstream_events_learned_total, model)",
             "query": {"query": "label_values(prefstream_events_learned_total, model)", "refId": "model"},
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "hide": 0,
             "refresh": 2, "regex": "", "sort": 1, "options": []},
            {"name": "method", "label": "explanation method", "type": "query", "datasource": DS,
             "definition": "label_values(prefstream_global_mean_abs_phi, method)",
             "query": {"query": "label_values(prefstream_global_mean_abs_phi, method)", "refId": "method"},
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "hide": 0,
             "refresh": 2, "regex": "", "sort": 1, "options": []},
        ]},
        "time": {"from": "now-30m", "to": "now"},
        "timepicker": {},
        "timezone": "browser",
        "title": "prefstream",
        "uid": "prefstream-workers",
        "version": 1,
        "weekStart": "",
    }


def render() -> str:
    return json.dumps(build(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render(), encoding="utf-8")
    print(f"wrote {OUT}")
