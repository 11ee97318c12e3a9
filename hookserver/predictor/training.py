"""One training round: from the state store to one sample per model (koordlet `peakPredictServer.training`).

For every pod with samples in the last training interval: the P90 of its CPU and memory usage (the pod
model's sample), summed per priority class and over all pods. Then the node model (P90 of node usage), one
sample per priority class (0 for a class with no pods), and the system model: node - all pods, floored at 0.
A pod with no CPU or no memory sample in the window is skipped, as in koordlet; the system model is skipped
when the node has no sample (koordlet would train it with 0, which drags the system peak down).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hookserver.aio.hotgate import paced
from hookserver.predictor.models import NODE_UID, SYSTEM_UID, priority_uid
from hookserver.podclass import KNOWN_PRIORITY_CLASSES, pod_priority_class
from hookserver.seriesnames import NODE_CPU, NODE_MEMORY, POD_CPU, POD_MEMORY
from hookserver.store.records import PodRecord
from hookserver.store.timeseries import TimeSeriesStore, percentile

__all__ = ["TrainingRound", "collect_training_round", "p90"]


def p90(values: list[float]) -> float:
    values.sort()
    return percentile(values, 0.9)


@dataclass(slots=True)
class TrainingRound:
    at: float
    samples: list[tuple[str, float, float]] = field(default_factory=list)
    pods_trained: int = 0
    pods_without_samples: int = 0
    node_trained: bool = False
    by_class: dict[str, tuple[float, float]] = field(default_factory=dict)


def _pod_values(series: TimeSeriesStore, metric: str, window_s: float, now: float) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for key in paced(series.keys(metric), every=16):  # the hot gate: a window's values of 16 pods between pauses
        uid = key.label("pod")
        if not uid:
            continue
        values = series.values(key, window_s, now=now)
        if values:
            got = out.get(uid)
            if got is None:
                out[uid] = values
            else:
                got.extend(values)  # the pod's labels (QoS, priority) changed inside the window
    return out


def _node_p90(series: TimeSeriesStore, metric: str, window_s: float, now: float) -> float | None:
    values: list[float] = []
    for key in series.keys(metric):
        values.extend(series.values(key, window_s, now=now))
    return p90(values) if values else None


def collect_training_round(
    pods: Mapping[str, PodRecord], series: TimeSeriesStore, *, now: float, window_s: float
) -> TrainingRound:
    result = TrainingRound(at=now)
    cpu = _pod_values(series, POD_CPU, window_s, now)
    memory = _pod_values(series, POD_MEMORY, window_s, now)
    sums: dict[str, list[float]] = {}
    all_cpu = 0.0
    all_memory = 0.0
    samples = result.samples
    for uid, pod in paced(pods.items()):  # the hot gate: step aside between pods
        pod_cpu = cpu.get(uid)
        pod_memory = memory.get(uid)
        if not pod_cpu or not pod_memory:
            result.pods_without_samples += 1
            continue
        c, m = p90(pod_cpu), p90(pod_memory)
        samples.append((uid, c, m))
        klass = pod_priority_class(pod)
        acc = sums.get(klass)
        if acc is None:
            sums[klass] = [c, m]
        else:
            acc[0] += c
            acc[1] += m
        all_cpu += c
        all_memory += m
    result.pods_trained = len(samples)
    node_cpu = _node_p90(series, NODE_CPU, window_s, now)
    node_memory = _node_p90(series, NODE_MEMORY, window_s, now)
    if node_cpu is not None and node_memory is not None:
        samples.append((NODE_UID, node_cpu, node_memory))
        result.node_trained = True
    for klass in KNOWN_PRIORITY_CLASSES:
        c, m = sums.get(klass, (0.0, 0.0))
        samples.append((priority_uid(klass), c, m))
        result.by_class[klass] = (c, m)
    if result.node_trained and node_cpu is not None and node_memory is not None:
        samples.append((SYSTEM_UID, max(node_cpu - all_cpu, 0.0), max(node_memory - all_memory, 0.0)))
    return result
