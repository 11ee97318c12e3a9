"""Prometheus metrics of the predictor and the NodeMetric report, on the daemon's registry.

The reclaimable and peak gauges keep koordlet's names and labels (`koordlet_node_predicted_resource_
reclaimable{node,predictor,resource,unit}`, predictor = podReclaimablePredictor | priorityReclaimablePredictor |
minPredictor, resource = cpu | memory, unit = core | byte), so a koordlet dashboard keeps working; so do
`koordlet_node_priority_resource_reclaimable{node,priority,resource,unit}` for the reported prod value and
`koordlet_node_resource_priority_reclaimable_status{node,priority}` (0 predicted, 1 prediction failed); and
koordlet's four `koordlet_node_metric_*_usage` gauges of the reported NodeMetric, recorded only while the
`NodeMetricPromMetrics` gate is on (`node_metric_prom=`; see nodemetric_prom.py).
Everything else is `hookserver_predictor_*` / `hookserver_nodemetric_*`.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hookserver.predictor.nodemetric_prom import NodeMetricPromSeries

__all__ = ["PredictorMetrics"]

_DURATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class PredictorMetrics:
    def __init__(self, registry: CollectorRegistry | None, *, node: str, node_metric_prom: bool = False) -> None:
        self.node = node
        # koordlet registers these always and records them only with its gate on: so do we.
        self.node_metric_usage = NodeMetricPromSeries(node=node, enabled=node_metric_prom)
        if registry is not None:
            registry.register(self.node_metric_usage)
        self.reclaimable = Gauge(
            "koordlet_node_predicted_resource_reclaimable", "the node reclaimable resources predicted by koordinator",
            ["node", "predictor", "resource", "unit"], registry=registry,
        )
        self.peak = Gauge(
            "koordlet_node_predicted_resource_peak", "the node peak resources predicted by koordinator",
            ["node", "predictor", "resource", "unit"], registry=registry,
        )
        self.priority_reclaimable = Gauge(
            "koordlet_node_priority_resource_reclaimable",
            "the node reclaimable of different priorities resources updated by koordinator",
            ["node", "priority", "resource", "unit"], registry=registry,
        )
        self.priority_reclaimable_status = Gauge(
            "koordlet_node_resource_priority_reclaimable_status",
            "status of node reclaimable of different priorities resources updated by koordinator (1: failed)",
            ["node", "priority"], registry=registry,
        )
        self.models = Gauge(
            "hookserver_predictor_models", "Predictor models held, by kind (pod, node, priority, system).",
            ["kind"], registry=registry,
        )
        self.training_duration = Histogram(
            "hookserver_predictor_training_duration_seconds", "Time one training round took (all models).",
            buckets=_DURATION_BUCKETS_S, registry=registry,
        )
        self.trained_pods = Gauge(
            "hookserver_predictor_trained_pods", "Pods that got a sample in the last training round.", registry=registry,
        )
        self.checkpoint_duration = Histogram(
            "hookserver_predictor_checkpoint_duration_seconds", "Time one checkpoint round took.",
            buckets=_DURATION_BUCKETS_S, registry=registry,
        )
        self.checkpoints_written = Counter(
            "hookserver_predictor_checkpoints_written_total", "Model checkpoint files written.", registry=registry,
        )
        self.checkpoint_failures = Counter(
            "hookserver_predictor_checkpoint_failures_total",
            "Checkpoint operations that failed, by operation (save, remove, restore).", ["operation"], registry=registry,
        )
        self.checkpoints_rejected = Counter(
            "hookserver_predictor_checkpoints_rejected_total",
            "Checkpoint files set aside at restore, by reason (corrupt, foreign, unreadable).", ["reason"],
            registry=registry,
        )
        self.restore_duration = Gauge(
            "hookserver_predictor_restore_duration_seconds", "How long restoring the checkpoints took at start.",
            registry=registry,
        )
        self.reports = Counter(
            "hookserver_nodemetric_reports_total",
            "NodeMetric status reports by target (apiserver, file) and result (ok, not_found, error, skipped).",
            ["target", "result"], registry=registry,
        )
        self.report_duration = Histogram(
            "hookserver_nodemetric_report_duration_seconds", "Time to build and deliver one NodeMetric status.",
            buckets=_DURATION_BUCKETS_S, registry=registry,
        )

    def record_reclaimable(self, predictor: str, cpu_milli: int, memory_bytes: int) -> None:
        self.reclaimable.labels(self.node, predictor, "cpu", "core").set(cpu_milli / 1000)
        self.reclaimable.labels(self.node, predictor, "memory", "byte").set(memory_bytes)

    def record_peak(self, predictor: str, cpu_milli: int, memory_bytes: int) -> None:
        self.peak.labels(self.node, predictor, "cpu", "core").set(cpu_milli / 1000)
        self.peak.labels(self.node, predictor, "memory", "byte").set(memory_bytes)

    def record_prod_reported(self, cpu_milli: int, memory_bytes: int, *, ok: bool = True) -> None:
        """As koordlet: the value (0 when the prediction failed) and a status gauge."""
        self.priority_reclaimable.labels(self.node, "koord-prod", "cpu", "core").set(cpu_milli / 1000 if ok else 0)
        self.priority_reclaimable.labels(self.node, "koord-prod", "memory", "byte").set(memory_bytes if ok else 0)
        self.priority_reclaimable_status.labels(self.node, "koord-prod").set(0 if ok else 1)
