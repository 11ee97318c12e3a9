"""Reclaimable resources with koordlet's semantics (`peak_predictor.go`, ProdReclaimablePredictor), explained.

Pods considered: those with usage samples in the report window (koordlet adds only pods whose metrics it
could query). Only koord-prod and priority-none pods are reclaimable from. Integer milli-cores and bytes
throughout, with Go's truncations, so a hand computation gives the published number exactly.

* pod-based: a pod younger than the cold-start duration (or with no model) counts its full request as peak and
  reclaims nothing; otherwise peak = p95 CPU x (1 + margin), p98 memory x (1 + margin), reclaimable = request -
  peak where positive. Result = min(max(allocatable - sum of peaks, 0), sum of reclaimable).
* priority-based: peak = (system p95 + koord-prod p95 + none p95) x (1 + margin) (memory with p98); reclaimable =
  max(sum of requests - peak, 0), limited by allocatable - peak.
* published = the per-resource minimum of the two; its peak is the per-resource maximum.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from hookserver.errors import InputError
from hookserver.predictor.models import SYSTEM_UID, Prediction, priority_uid
from hookserver.podclass import (
    NodeAllocatable,
    effective_requests,
    is_terminated,
    pod_priority_class,
    terminated_reason,
)
from hookserver.store.records import PodRecord

__all__ = [
    "MIN_PREDICTOR",
    "POD_PREDICTOR",
    "PRIORITY_PREDICTOR",
    "PodLine",
    "PredictorResult",
    "ReclaimableReport",
    "compute_reclaimable",
    "reclaimable_for_prod",
]

POD_PREDICTOR = "podReclaimablePredictor"
PRIORITY_PREDICTOR = "priorityReclaimablePredictor"
MIN_PREDICTOR = "minPredictor"
_PROD_CLASSES = ("koord-prod", "")


def reclaimable_for_prod(priority_class: str) -> bool:
    return priority_class in _PROD_CLASSES


@dataclass(frozen=True, slots=True)
class PodLine:
    """How one pod entered the pod-based predictor (and whether the priority-based one counted its request)."""

    uid: str
    namespace: str
    name: str
    priority_class: str
    counted_as: str  # predicted | cold | no-model | bad-request | skipped:<why>
    age_s: float
    request_cpu_milli: int = 0
    request_memory_bytes: int = 0
    p95_cpu_milli: int = 0
    p98_memory_bytes: int = 0
    peak_cpu_milli: int = 0
    peak_memory_bytes: int = 0
    reclaimable_cpu_milli: int = 0
    reclaimable_memory_bytes: int = 0
    note: str = ""


@dataclass(frozen=True, slots=True)
class PredictorResult:
    name: str
    cpu_milli: int = 0
    memory_bytes: int = 0
    peak_cpu_milli: int = 0
    peak_memory_bytes: int = 0
    error: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass(frozen=True, slots=True)
class ReclaimableReport:
    at: float
    margin_percent: int
    cold_start_s: float
    allocatable: NodeAllocatable | None
    pod_based: PredictorResult
    priority_based: PredictorResult
    published: PredictorResult
    pods: tuple[PodLine, ...]


def _scale(value: int, ratio: float) -> int:
    """Go `int64(float64(v) * ratio)`: truncation toward zero."""
    return int(float(value) * ratio)


def compute_reclaimable(
    *,
    pods: Iterable[PodRecord],
    with_metrics: set[str],
    predictions: Mapping[str, Prediction],
    allocatable: NodeAllocatable | None,
    now: float,
    cold_start_s: float,
    margin_percent: int,
) -> ReclaimableReport:
    ratio = float(100 + margin_percent) / 100
    lines: list[PodLine] = []
    reclaim_cpu = reclaim_mem = 0  # pod-based: sum of positive reclaimables
    unrec_cpu = unrec_mem = 0  # pod-based: sum of predicted peaks
    unpred_cpu = unpred_mem = 0  # pod-based: requests of cold / unpredicted pods (peak only)
    request_cpu = request_mem = 0  # priority-based: requests of prod/none pods
    for pod in sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)):
        klass = pod_priority_class(pod)
        model = predictions.get(pod.uid)
        created = pod.created_at or pod.first_seen or now
        if model is not None and model.first_sample:
            created = min(created, model.first_sample)
        age = max(now - created, 0.0)
        base = PodLine(pod.uid, pod.namespace, pod.name, klass, "", age)
        if pod.uid not in with_metrics:
            lines.append(replace(base, counted_as="skipped:no-usage-samples"))
            continue
        if not reclaimable_for_prod(klass):
            lines.append(replace(base, counted_as=f"skipped:{klass}"))
            continue
        try:
            req = effective_requests(pod)
        except InputError as exc:
            lines.append(replace(base, counted_as="bad-request", note=str(exc)))
            continue
        base = replace(base, request_cpu_milli=req.cpu_milli, request_memory_bytes=req.memory_bytes)
        if age <= cold_start_s:
            unpred_cpu += req.cpu_milli
            unpred_mem += req.memory_bytes
            if not is_terminated(pod):  # the priority-based predictor skips finished pods, cold or not
                request_cpu += req.cpu_milli
                request_mem += req.memory_bytes
            lines.append(replace(base, counted_as="cold", peak_cpu_milli=req.cpu_milli,
                                 peak_memory_bytes=req.memory_bytes))
            continue
        if is_terminated(pod):
            lines.append(replace(base, counted_as=f"skipped:{terminated_reason(pod)}"))
            continue
        request_cpu += req.cpu_milli
        request_mem += req.memory_bytes
        if model is None:
            unpred_cpu += req.cpu_milli
            unpred_mem += req.memory_bytes
            lines.append(replace(base, counted_as="no-model", peak_cpu_milli=req.cpu_milli,
                                 peak_memory_bytes=req.memory_bytes))
            continue
        p95, p98 = model.cpu("p95"), model.memory("p98")
        peak_cpu, peak_mem = _scale(p95, ratio), _scale(p98, ratio)
        unrec_cpu += peak_cpu
        unrec_mem += peak_mem
        r_cpu, r_mem = req.cpu_milli - peak_cpu, req.memory_bytes - peak_mem
        reclaim_cpu += max(r_cpu, 0)
        reclaim_mem += max(r_mem, 0)
        lines.append(replace(base, counted_as="predicted", p95_cpu_milli=p95, p98_memory_bytes=p98, peak_cpu_milli=peak_cpu,
                             peak_memory_bytes=peak_mem, reclaimable_cpu_milli=max(r_cpu, 0),
                             reclaimable_memory_bytes=max(r_mem, 0)))

    pod_based = _pod_based(allocatable, reclaim_cpu, reclaim_mem, unrec_cpu, unrec_mem, unpred_cpu, unpred_mem)
    priority_based = _priority_based(allocatable, predictions, request_cpu, request_mem, ratio)
    published = _minimum(pod_based, priority_based)
    return ReclaimableReport(now, margin_percent, cold_start_s, allocatable, pod_based, priority_based, published,
                             tuple(lines))


def _pod_based(
    alloc: NodeAllocatable | None, r_cpu: int, r_mem: int, u_cpu: int, u_mem: int, n_cpu: int, n_mem: int
) -> PredictorResult:
    inputs = {"sum_reclaimable_cpu_milli": r_cpu, "sum_reclaimable_memory_bytes": r_mem,
              "sum_peak_cpu_milli": u_cpu, "sum_peak_memory_bytes": u_mem,
              "cold_or_unpredicted_request_cpu_milli": n_cpu, "cold_or_unpredicted_request_memory_bytes": n_mem}
    peak_cpu, peak_mem = u_cpu + n_cpu, u_mem + n_mem
    if alloc is None:
        return PredictorResult(POD_PREDICTOR, peak_cpu_milli=peak_cpu, peak_memory_bytes=peak_mem,
                               error="node allocatable unknown", inputs=inputs)
    cpu = min(max(alloc.cpu_milli - u_cpu, 0), r_cpu)
    mem = min(max(alloc.memory_bytes - u_mem, 0), r_mem)
    return PredictorResult(POD_PREDICTOR, cpu, mem, peak_cpu, peak_mem, inputs=inputs)


def _priority_based(
    alloc: NodeAllocatable | None, predictions: Mapping[str, Prediction], req_cpu: int, req_mem: int, ratio: float
) -> PredictorResult:
    inputs: dict[str, Any] = {"sum_request_cpu_milli": req_cpu, "sum_request_memory_bytes": req_mem}
    peaks: dict[str, dict[str, int]] = {}
    missing: list[str] = []
    for uid in (SYSTEM_UID, *(priority_uid(k) for k in _PROD_CLASSES)):
        model = predictions.get(uid)
        if model is None:
            missing.append(uid)
            continue
        peaks[uid] = {"p95_cpu_milli": model.cpu("p95"), "p98_memory_bytes": model.memory("p98")}
    inputs["models"] = peaks
    if missing:
        return PredictorResult(PRIORITY_PREDICTOR, error=f"no model yet for {', '.join(missing)}", inputs=inputs)
    peak_cpu = _scale(sum(p["p95_cpu_milli"] for p in peaks.values()), ratio)
    peak_mem = _scale(sum(p["p98_memory_bytes"] for p in peaks.values()), ratio)
    if alloc is None:
        return PredictorResult(PRIORITY_PREDICTOR, peak_cpu_milli=peak_cpu, peak_memory_bytes=peak_mem,
                               error="node allocatable unknown", inputs=inputs)
    cpu = min(max(alloc.cpu_milli - peak_cpu, 0), max(req_cpu - peak_cpu, 0))
    mem = min(max(alloc.memory_bytes - peak_mem, 0), max(req_mem - peak_mem, 0))
    return PredictorResult(PRIORITY_PREDICTOR, cpu, mem, peak_cpu, peak_mem, inputs=inputs)


def _minimum(a: PredictorResult, b: PredictorResult) -> PredictorResult:
    failed = [r for r in (a, b) if not r.ok]
    if failed:
        return PredictorResult(MIN_PREDICTOR, error="; ".join(f"{r.name}: {r.error}" for r in failed))
    return PredictorResult(
        MIN_PREDICTOR,
        min(a.cpu_milli, b.cpu_milli),
        min(a.memory_bytes, b.memory_bytes),
        max(a.peak_cpu_milli, b.peak_cpu_milli),
        max(a.peak_memory_bytes, b.peak_memory_bytes),
        inputs={"cpu_from": a.name if a.cpu_milli <= b.cpu_milli else b.name,
                "memory_from": a.name if a.memory_bytes <= b.memory_bytes else b.name},
    )
