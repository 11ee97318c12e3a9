"""What the predictor and the capacity publisher need to know about a pod or the node (a shared helper outside
the layers, over the store's records): koordinator priority class and QoS, requests,
age, and the node's allocatable, with koordinator's exact rules (apis/extension priority.go, qos_utils.go,
priority_utils.go, node_resource_amplification.go).

Priority class: the `koordinator.sh/priority-class` label when present (an unknown value means none), else
`spec.priority` ranges (prod 9000-9999, mid 7000-7999, batch 5000-5999, free 3000-3999); when that gives
none, the QoS default: LSE/LSR/LS/SYSTEM -> koord-prod, BE -> koord-batch. QoS: the `koordinator.sh/qosClass`
label, else from kube QoS (Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE), computed from the container
specs when the pod status carries none.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hookserver.errors import InputError
from hookserver.quantity import parse_quantity
from hookserver.store.records import ContainerRecord, NodeRecord, PodRecord
from hookserver.store.specs import SOURCE_NONE, container_spec
from hookserver.system.cgroupnames import kube_qos_of_cgroup_parent

__all__ = [
    "KNOWN_PRIORITY_CLASSES",
    "LABEL_PRIORITY_CLASS",
    "NodeAllocatable",
    "PodRequests",
    "cpu_memory",
    "effective_requests",
    "is_terminated",
    "node_allocatable",
    "pod_priority_class",
    "pod_qos_class",
    "priority_class_by_value",
    "request_amounts",
    "terminated_reason",
]

LABEL_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_QOS_CLASS = "koordinator.sh/qosClass"
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
# koordinator's KnownPriorityClasses, in its order; "" is "none".
KNOWN_PRIORITY_CLASSES = ("koord-prod", "koord-mid", "koord-batch", "koord-free", "")
_RANGES = (("koord-prod", 9000, 9999), ("koord-mid", 7000, 7999), ("koord-batch", 5000, 5999), ("koord-free", 3000, 3999))
_QOS = frozenset({"LSE", "LSR", "LS", "BE", "SYSTEM"})


def priority_class_by_value(priority: int | None) -> str:
    if priority is None:
        return ""
    for name, low, high in _RANGES:
        if low <= priority <= high:
            return name
    return ""


def _kube_qos(pod: PodRecord) -> str:
    if pod.kube_qos:
        return pod.kube_qos.replace("-", "").lower()
    tier = kube_qos_of_cgroup_parent(pod.cgroup_parent)  # a pod only the runtime announced
    if tier is not None:
        return tier.value
    specs = pod.container_specs
    if not specs:
        return ""
    any_set = False
    guaranteed = True
    for requests, limits in specs.values():
        for resource in ("cpu", "memory"):
            req, lim = requests.get(resource), limits.get(resource)
            if req is not None or lim is not None:
                any_set = True
            if lim is None or (req is not None and _same(req, lim) is False):
                guaranteed = False
    if not any_set:
        return "besteffort"
    return "guaranteed" if guaranteed else "burstable"


def _same(a: str, b: str) -> bool | None:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except InputError:
        return None


def pod_qos_class(pod: PodRecord) -> str:
    """koordinator's GetPodQoSClassWithDefault."""
    label = pod.labels.get(LABEL_QOS_CLASS)
    if label is not None:
        if label in _QOS:
            return label
    elif pod.qos_class in _QOS:
        return pod.qos_class
    return {"guaranteed": "LSR", "burstable": "LS", "besteffort": "BE"}.get(_kube_qos(pod), "")


def pod_priority_class(pod: PodRecord) -> str:
    """koordinator's GetPodPriorityClassWithDefault."""
    label = pod.labels.get(LABEL_PRIORITY_CLASS)
    if label is not None:
        raw = label if label in KNOWN_PRIORITY_CLASSES else ""
    else:
        raw = priority_class_by_value(pod.priority)
    if raw:
        return raw
    qos = pod_qos_class(pod)
    if qos in ("SYSTEM", "LSE", "LSR", "LS"):
        return "koord-prod"
    if qos == "BE":
        return "koord-batch"
    return ""


@dataclass(frozen=True, slots=True)
class PodRequests:
    cpu_milli: int
    memory_bytes: int


def cpu_memory(values: Mapping[str, object], where: str) -> tuple[int, int]:
    """(cpu milli-cores, memory bytes) of a resource map (requests, capacity, an annotation's resources); 0 where
    absent. InputError names the bad quantity as `<where>[cpu]`."""
    cpu = parse_quantity(str(values["cpu"]), field=f"{where}[cpu]").milli_value() if "cpu" in values else 0
    memory = parse_quantity(str(values["memory"]), field=f"{where}[memory]").value() if "memory" in values else 0
    return cpu, memory


# Resources pod-level `spec.resources` may set (k8s `IsSupportedPodLevelResource`).
_POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def _amounts(values: Mapping[str, str], resources: tuple[str, ...], where: str) -> dict[str, int]:
    """The named resources present in `values`: cpu in milli-cores, any other as its Value(); a negative one
    (the apiserver refuses them) counts 0."""
    out: dict[str, int] = {}
    for res in resources:
        if res in values:
            q = parse_quantity(str(values[res]), field=f"{where}[{res}]")
            out[res] = max(q.milli_value() if res == "cpu" else q.value(), 0)
    return out


def _app_requests(pod: PodRecord, containers: Iterable[ContainerRecord]) -> list[tuple[str, Mapping[str, str]]]:
    """(name, requests) of the app containers: the pod spec's; for a pod without one (known only from the
    proxy, NRI or standalone), what the runtime announced for each container it created (store.specs: the
    CPU request from cpu.shares, under batch-cpu for a BE pod; the runtime states no memory request). The
    runtime does not say which of them are init containers, so every announced container counts as one
    running beside the others; the newest record of a name wins."""
    if pod.container_specs:
        return [(name, requests) for name, (requests, _limits) in pod.container_specs.items()]
    newest: dict[str, ContainerRecord] = {}
    for record in containers:
        if record.pod_uid == pod.uid and (record.name not in newest or
                                          record.updated_at >= newest[record.name].updated_at):
            newest[record.name] = record
    out: list[tuple[str, Mapping[str, str]]] = []
    for name, record in sorted(newest.items()):
        spec = container_spec(pod, name, record)
        if spec.source != SOURCE_NONE:
            out.append((name, spec.requests))
    return out


def request_amounts(pod: PodRecord, resources: tuple[str, ...],
                    containers: Iterable[ContainerRecord] = ()) -> dict[str, int]:
    """k8s `resource.PodRequests` for `resources`, the one place a pod's requests are aggregated (capacity,
    the eviction ledgers, the collectors, the predictor): per resource, the larger of (the app containers' sum
    + every sidecar, i.e. init container with restartPolicy Always, since sidecars run beside them) and (each
    regular init container + the sidecars started before it); pod-level `spec.resources` requests replace that
    where set (cpu, memory); `spec.overhead` on top. `containers` (the pod's container records) stand in for
    a missing pod spec (_app_requests). Only resources something names are in the result; cpu in
    milli-cores, the others as counts (bytes for memory). InputError names a bad quantity."""
    total: dict[str, int] = {}
    for name, requests in _app_requests(pod, containers):
        for res, amount in _amounts(requests, resources, f"{name}.requests").items():
            total[res] = total.get(res, 0) + amount
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for name, requests, sidecar in pod.init_container_specs:
        amounts = _amounts(requests, resources, f"initContainers.{name}.requests")
        if sidecar:
            for res, amount in amounts.items():
                total[res] = total.get(res, 0) + amount
                sidecars[res] = sidecars.get(res, 0) + amount
            during = dict(sidecars)  # while it starts, the sidecars before it and itself run
        else:
            during = {res: amounts.get(res, 0) + sidecars.get(res, 0) for res in {*amounts, *sidecars}}
        for res, amount in during.items():
            init_peak[res] = max(init_peak.get(res, 0), amount)
    for res, amount in init_peak.items():
        total[res] = max(total.get(res, 0), amount)
    if pod.pod_level_requests:
        level = _amounts(pod.pod_level_requests, tuple(r for r in resources if r in _POD_LEVEL_RESOURCES),
                         "spec.resources.requests")
        total.update(level)
    if pod.overhead:
        for res, amount in _amounts(pod.overhead, resources, "spec.overhead").items():
            total[res] = total.get(res, 0) + amount
    return total


def effective_requests(pod: PodRecord, containers: Iterable[ContainerRecord] = ()) -> PodRequests:
    """What the scheduler counts for the pod's cpu and memory (k8s `resource.PodRequests`, which
    koord-manager's batch formula uses; see request_amounts). InputError names a bad quantity."""
    amounts = request_amounts(pod, ("cpu", "memory"), containers)
    return PodRequests(amounts.get("cpu", 0), amounts.get("memory", 0))


def is_terminated(pod: PodRecord) -> bool:
    """Finished (Succeeded/Failed) or terminating (deletionTimestamp set): its request is about to be
    released, so counting it as reclaimable would publish batch capacity that leaves with the pod."""
    return pod.phase in ("Succeeded", "Failed") or bool(pod.deletion_timestamp)


def terminated_reason(pod: PodRecord) -> str:
    """`succeeded`/`failed`, else `terminating`: why is_terminated(pod) holds, for the per-pod lines."""
    return pod.phase.lower() if pod.phase in ("Succeeded", "Failed") else "terminating"


@dataclass(frozen=True, slots=True)
class NodeAllocatable:
    cpu_milli: int
    memory_bytes: int
    source: str  # "raw-allocatable annotation" or "status.allocatable"


def node_allocatable(node: NodeRecord | None) -> NodeAllocatable | None:
    """The un-amplified raw allocatable annotation when present and valid, else status.allocatable."""
    if node is None:
        return None
    raw = node.annotations.get(ANNOTATION_RAW_ALLOCATABLE)
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, Mapping) and parsed:
                return _allocatable(parsed, ANNOTATION_RAW_ALLOCATABLE)
        except (ValueError, InputError):
            pass
    if not node.allocatable:
        return None
    try:
        return _allocatable(node.allocatable, "status.allocatable")
    except InputError:
        return None


def _allocatable(values: Mapping[str, object], source: str) -> NodeAllocatable:
    cpu, memory = cpu_memory(values, source)
    return NodeAllocatable(cpu, memory, source)
