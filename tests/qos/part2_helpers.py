"""Scripted kernel facts for the part-2 planners."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from hookserver.executor.plan import CgroupResource
from hookserver.slo.document import spec_from_json
from qos.snapshot.kernel import ContainerKernel, KernelFacts, PodKernel
from qos.framework.plan import QoSPlan
from qos.snapshot.model import QoSSnapshot
from tests.qos.helpers import snapshot

TIERS = MappingProxyType({"kubepods": "kubepods", "burstable": "kubepods/burstable", "besteffort": "kubepods/besteffort"})


def container(pod: str, name: str = "c1", **kw: Any) -> ContainerKernel:
    tier = "kubepods/besteffort" if pod.startswith("be") else "kubepods/burstable"
    return ContainerKernel(id=f"{pod}-{name}", name=name, dir=f"{tier}/pod{pod}/{pod}-{name}", **kw)


def pod_kernel(pod: str, *containers: ContainerKernel, **kw: Any) -> PodKernel:
    tier = "kubepods/besteffort" if pod.startswith("be") else "kubepods/burstable"
    return PodKernel(uid=f"uid-{pod}", dir=f"{tier}/pod{pod}", containers=containers, **kw)


def kernel(*pods: PodKernel, read: tuple[str, ...] = ("pods",), **kw: Any) -> KernelFacts:
    return KernelFacts(read=frozenset(read), tiers=TIERS, pods=MappingProxyType({p.uid: p for p in pods}), **kw)


def spec_snapshot(spec: dict[str, Any], **kw: Any) -> QoSSnapshot:
    resolved = spec_from_json(spec, origin="test")
    return snapshot(slo=resolved.spec, slo_sources=resolved.sources, **kw)


def writes(plan: QoSPlan, resource: CgroupResource) -> dict[str, int | str]:
    return {w.cgroup_dir: w.value for p in plan.writes for w in p.all_writes() if w.resource is resource}
