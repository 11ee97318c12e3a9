"""Shared builders for predictor tests."""

from __future__ import annotations

from types import MappingProxyType

from hookserver.predictor.models import Prediction
from hookserver.store.records import NodeRecord, PodRecord

GI = 2**30
MI = 2**20
DAY = 86400.0
NOW = 1_800_000_000.0


def pod(name: str, *, uid: str = "", cpu: str = "1", memory: str = "1Gi", labels: dict[str, str] | None = None,
        priority: int | None = None, age_s: float = 2 * DAY, phase: str = "Running", kube_qos: str = "Burstable",
        namespace: str = "default") -> PodRecord:
    return PodRecord(
        uid=uid or f"uid-{name}", namespace=namespace, name=name, labels=MappingProxyType(dict(labels or {})),
        priority=priority, phase=phase, kube_qos=kube_qos, created_at=NOW - age_s, first_seen=NOW - age_s,
        container_specs=MappingProxyType({"main": (MappingProxyType({"cpu": cpu, "memory": memory}),
                                                   MappingProxyType({}))}),
    )


def prediction(uid: str, *, p95_cpu: int = 0, p98_mem: int = 0, first_sample: float = NOW - 3 * DAY) -> Prediction:
    """p60/p90/max are filled with other numbers so a test that reads the wrong one fails."""
    return Prediction(uid, (1, 2, p95_cpu, 3, 4), (5, 6, 7, p98_mem, 8), 100, first_sample, NOW, 0.0)


def node(cpu: str = "8", memory: str = "16Gi", annotations: dict[str, str] | None = None) -> NodeRecord:
    return NodeRecord(name="node-a", allocatable=MappingProxyType({"cpu": cpu, "memory": memory}),
                      annotations=MappingProxyType(dict(annotations or {})))
