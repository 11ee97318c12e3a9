"""koordinator's annotation names and the readers of the ones the node agent consumes.

Names from koordinator's `apis/extension/numa_aware.go`, `node_reservation.go`, `system_qos.go` and
`cpu_normalization.go` (`node.koordinator.sh/cpu-basic-info`). Readers follow `extension.GetResourceStatus`,
`GetNodeReservation` and `GetSystemQOSResource`: an absent annotation is "nothing", a malformed one is an
error (koordlet's hook returns it; here it is a `ResourceStatusError` naming the annotation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from hookserver.errors import InputError
from hookserver.system.cpulist import parse_cpu_list

__all__ = [
    "ANNOTATION_CPU_BASIC_INFO",
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_NODE_BE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_ALLOCS",
    "ANNOTATION_NODE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_TOPOLOGY",
    "ANNOTATION_NODE_RESERVATION",
    "ANNOTATION_NODE_SYSTEM_QOS_RESOURCE",
    "ANNOTATION_RESOURCE_STATUS",
    "ResourceStatusError",
    "node_reserved_cpus",
    "pod_cpuset",
    "pod_numa_nodes",
    "system_qos_exclusive_cpus",
]

ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
ANNOTATION_NODE_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_NODE_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_NODE_CPU_SHARED_POOLS = "node.koordinator.sh/cpu-shared-pools"
ANNOTATION_NODE_BE_CPU_SHARED_POOLS = "node.koordinator.sh/be-cpu-shared-pools"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_NODE_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"


class ResourceStatusError(InputError):
    """A pod's resource-status annotation that does not decode, or whose cpuset is not a CPU list."""


def _json_object(text: str, field: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ResourceStatusError(f"not JSON ({exc.msg} at offset {exc.pos}): {text[:80]!r}", field=field) from None
    if not isinstance(value, dict):
        raise ResourceStatusError(f"not a JSON object: {text[:80]!r}", field=field)
    return value


def pod_cpuset(annotations: Mapping[str, str]) -> frozenset[int] | None:
    """The CPUs koord-scheduler bound the pod to (`scheduling.koordinator.sh/resource-status` `cpuset`):
    None when the annotation or its `cpuset` is absent or empty (koordlet's `GetCPUSetFromPod` gives "").
    Raises ResourceStatusError for text that is not a JSON object or a cpuset that is not a CPU list."""
    text = annotations.get(ANNOTATION_RESOURCE_STATUS)
    if text is None:
        return None
    field = f"annotations[{ANNOTATION_RESOURCE_STATUS}]"
    raw = _json_object(text, field).get("cpuset", "")
    if not isinstance(raw, str):
        raise ResourceStatusError(f"cpuset is a {type(raw).__name__}, not a CPU list string", field=field)
    try:
        cpus = parse_cpu_list(raw)
    except ValueError as exc:
        raise ResourceStatusError(f"cpuset {raw!r}: {exc}", field=field) from None
    return cpus or None


def pod_numa_nodes(annotations: Mapping[str, str]) -> tuple[int, ...]:
    """The NUMA nodes koord-scheduler constrained the pod to (`resource-status` `numaNodeResources[].node`),
    sorted and distinct; empty when the annotation or the list is absent. koord-manager splits a pod's request
    and usage over these zones for NUMA-level batch capacity (`GetPodNUMARequestAndUsage`). An entry without
    `node` (or with `null`) is node 0, as Go's unmarshal leaves the int32 at zero. Raises ResourceStatusError
    for text that is not a JSON object or entries that are not objects with an integer `node` (Go's unmarshal
    fails the whole annotation then, and koord-manager counts the pod as sharing every zone)."""
    text = annotations.get(ANNOTATION_RESOURCE_STATUS)
    if text is None:
        return ()
    field = f"annotations[{ANNOTATION_RESOURCE_STATUS}]"
    raw = _json_object(text, field).get("numaNodeResources")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ResourceStatusError(f"numaNodeResources is a {type(raw).__name__}, not a list", field=field)
    nodes: set[int] = set()
    for entry in raw:
        node = (entry.get("node") if entry.get("node") is not None else 0) if isinstance(entry, dict) else None
        if not isinstance(node, int) or isinstance(node, bool) or not -(1 << 31) <= node < (1 << 31):
            raise ResourceStatusError(f"numaNodeResources entry {entry!r} has no int32 node", field=field)
        nodes.add(node)
    return tuple(sorted(nodes))


def node_reserved_cpus(annotations: Mapping[str, str]) -> tuple[frozenset[int], str]:
    """`node.koordinator.sh/reservation` `reservedCPUs` (koordlet's `getNodeReserved`), and a note when the
    annotation is unreadable or reserves a CPU count only (koordlet then takes CPUs by topology; not here)."""
    text = annotations.get(ANNOTATION_NODE_RESERVATION, "")
    if not text:
        return frozenset(), ""
    try:
        value = json.loads(text)
        raw = value.get("reservedCPUs", "") if isinstance(value, dict) else None
        if not isinstance(raw, str):
            return frozenset(), f"{ANNOTATION_NODE_RESERVATION} is not an object with a reservedCPUs string"
        cpus = parse_cpu_list(raw)
    except ValueError as exc:
        return frozenset(), f"{ANNOTATION_NODE_RESERVATION} unreadable: {exc}"
    if not cpus and isinstance(value.get("resources"), dict) and value["resources"].get("cpu"):
        return frozenset(), f"{ANNOTATION_NODE_RESERVATION} reserves a CPU count without reservedCPUs: not excluded"
    return cpus, ""


def system_qos_exclusive_cpus(annotations: Mapping[str, str]) -> frozenset[int]:
    """`node.koordinator.sh/system-qos-resource` `cpuset` when `cpusetExclusive` is not false (koordlet's
    default true); empty when absent or unreadable."""
    text = annotations.get(ANNOTATION_NODE_SYSTEM_QOS_RESOURCE, "")
    if not text:
        return frozenset()
    try:
        value = json.loads(text)
        if not isinstance(value, dict) or value.get("cpusetExclusive", True) is False:
            return frozenset()
        raw = value.get("cpuset", "")
        return parse_cpu_list(raw) if isinstance(raw, str) else frozenset()
    except ValueError:
        return frozenset()
