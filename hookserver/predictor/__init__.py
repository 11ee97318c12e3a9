"""Predictor layer (areas: beside hooks | executor | informer | collectors | qos; imports only store, slo and
system): decaying histograms per pod, priority class and system, checkpointed under --state-dir, the
reclaimable estimate koord-manager turns into batch allocatable, and the NodeMetric status document.

    metrics = PredictorMetrics(registry, node=..., node_metric_prom=gates.enabled(NODE_METRIC_PROM_GATE))
    service = PredictorService(settings, store=store, checkpoint_dir=..., metrics=metrics)
    await service.run(stop)                      # restore, then train / gc / checkpoint every interval
    reporter = NodeMetricReporter(service, sink, settings=settings)   # sink: the informer's patcher or a file
    await reporter.run(stop)
    predict_view(service, args), reclaimable_view(service, args)     # hookctl predict / reclaimable

The daemon wires it; the apiserver is reached only through the sink the informer provides.
"""

from __future__ import annotations

from hookserver.predictor.checkpoint import CheckpointProblem, Checkpointer, RestoreResult
from hookserver.predictor.histogram import CPU_BUCKETS, MEMORY_BUCKETS, DecayingHistogram, ExponentialBuckets
from hookserver.predictor.metrics import PredictorMetrics
from hookserver.predictor.models import NODE_UID, SYSTEM_UID, Model, ModelTable, Prediction, priority_uid
from hookserver.predictor.nodemetric_prom import NODE_METRIC_PROM_GATE, NodeMetricPromSeries
from hookserver.predictor.nodemetric_status import ReportPolicy, build_status, report_policy
from hookserver.predictor.predictors import ReclaimableReport, compute_reclaimable
from hookserver.predictor.reporter import Delivery, FileStatusSink, NodeMetricReporter, StatusSink
from hookserver.predictor.service import PredictorService
from hookserver.predictor.settings import PredictorSettings
from hookserver.predictor.views import predict_view, reclaimable_view

__all__ = [
    "CPU_BUCKETS",
    "MEMORY_BUCKETS",
    "NODE_METRIC_PROM_GATE",
    "NODE_UID",
    "SYSTEM_UID",
    "CheckpointProblem",
    "Checkpointer",
    "DecayingHistogram",
    "Delivery",
    "ExponentialBuckets",
    "FileStatusSink",
    "Model",
    "ModelTable",
    "NodeMetricPromSeries",
    "NodeMetricReporter",
    "Prediction",
    "PredictorMetrics",
    "PredictorService",
    "PredictorSettings",
    "ReclaimableReport",
    "ReportPolicy",
    "RestoreResult",
    "StatusSink",
    "build_status",
    "compute_reclaimable",
    "predict_view",
    "priority_uid",
    "reclaimable_view",
    "report_policy",
]
