"""A container's requests and limits: from the pod spec when the apiserver (or kubelet) gave one, else from
the resources the runtime announced for it (the proxy's `LinuxContainerResources`, NRI's linux resources).

Why: without an apiserver (standalone mode) or for a pod known only from the proxy or NRI, the pod spec is
missing, and every reconciler that reads a container's limits (CPU burst, memory QoS, ...) would see "no
limit" and do nothing. The runtime already says what the kubelet derived from that spec: the CFS quota over
the period is the CPU limit, `cpu.shares` the CPU request (shares = milli × 1024 / 1000), the memory limit
the memory limit. Those are turned back into the spec's quantity texts so readers need no second code path.
A BE pod's spec states its resources as koordinator's batch resources, so its announced values are given
under those names. Those announced values are only the kubelet's view of a BestEffort container (cpu.shares
2, no quota: "no request"), while koord-manager's extended-resource-spec annotation holds the spec's own
batch requests and limits (`store.annotated_specs`), so a container the annotation lists takes its batch
resources from there, ahead of the announced ones. `source` says which was used (`hookctl explain` shows it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.resources import Resources
from hookserver.store.annotated_specs import annotated_container_spec
from hookserver.store.records import ContainerRecord, PodRecord
from hookserver.system.cgroupnames import KubeQoS, kube_qos_of_pod

__all__ = ["SOURCE_ANNOTATION", "SOURCE_NONE", "SOURCE_SPEC", "ContainerSpec", "announced_spec", "container_spec"]

SOURCE_SPEC = "pod spec"
SOURCE_ANNOTATION = "extended-resource-spec annotation"
SOURCE_NONE = "none"
# The kubelet gives a container without a CPU request 2 shares (the kernel's minimum): "no request".
_MIN_SHARES = 2
_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class ContainerSpec:
    """Requests and limits as resource name -> quantity text, and where they came from: `pod spec`,
    `extended-resource-spec annotation`, `runtime (proxy)` / `runtime (nri)` (the announced resources), the
    annotation and the runtime together (`... + runtime (proxy)`), or `none`."""

    requests: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    limits: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    source: str = SOURCE_NONE


def announced_spec(resources: Resources, *, be: bool = False) -> tuple[dict[str, str], dict[str, str]]:
    """(requests, limits) a runtime's announced resources stand for; empty where it said nothing."""
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    cpu_key, mem_key = (BATCH_CPU, BATCH_MEMORY) if be else ("cpu", "memory")
    quota, period = resources.cpu_quota_us, resources.cpu_period_us or 100_000
    if quota is not None and quota > 0 and period > 0:
        milli = quota * 1000 // period
        limits[cpu_key] = str(milli) if be else f"{milli}m"  # batch-cpu counts milli-cores
    shares = resources.cpu_shares
    if shares is not None and shares > _MIN_SHARES:
        milli = shares * 1000 // 1024
        requests[cpu_key] = str(milli) if be else f"{milli}m"
    if resources.memory_limit_bytes is not None and resources.memory_limit_bytes > 0:
        limits[mem_key] = str(resources.memory_limit_bytes)
    return requests, limits


def _is_be(pod: PodRecord) -> bool:
    """BE by its class, else by its kube QoS: the status's, or the tier its cgroup parent is in."""
    if pod.qos_class:
        return pod.qos_class == "BE"
    return kube_qos_of_pod(pod.kube_qos, pod.cgroup_parent) is KubeQoS.BESTEFFORT


def container_spec(pod: PodRecord, name: str, container: ContainerRecord | None = None) -> ContainerSpec:
    """The spec's requests and limits for container `name` when the pod spec lists it; otherwise the
    extended-resource-spec annotation's entry for it (the spec's batch resources) with, for a pod that is not
    BE, the cpu/memory the runtime announced in `container` (its store record); otherwise what the runtime
    announced; otherwise nothing (`none`)."""
    spec = pod.container_specs.get(name)
    if spec is not None:
        return ContainerSpec(spec[0], spec[1], SOURCE_SPEC)
    annotated = annotated_container_spec(pod, name)
    be = _is_be(pod)
    if annotated is not None and be:  # a BE pod's announced values are batch resources too: the annotation's win
        return ContainerSpec(annotated[0], annotated[1], SOURCE_ANNOTATION)
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if container is not None and not container.resources.is_empty():
        requests, limits = announced_spec(container.resources, be=be)
    runtime = f"runtime ({container.source or 'hook'})" if container is not None else ""
    if annotated is not None:  # not BE: announced under cpu/memory, which the annotation never names
        return ContainerSpec(MappingProxyType(requests | dict(annotated[0])),
                             MappingProxyType(limits | dict(annotated[1])),
                             f"{SOURCE_ANNOTATION} + {runtime}" if requests or limits else SOURCE_ANNOTATION)
    if requests or limits:
        return ContainerSpec(MappingProxyType(requests), MappingProxyType(limits), runtime)
    return ContainerSpec()
