"""The node as the QoS planners see it: capacity, allocatable and koordinator's reservation annotations.

Pure parsing of a `NodeRecord`; a malformed annotation counts as absent (it is the scheduler's input, not
ours to reject), a malformed quantity as zero.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from hookserver.errors import InputError
from hookserver.quantity import parse_quantity
from hookserver.store.records import NodeRecord
from hookserver.system.cpulist import parse_cpu_list

from qos.snapshot.model import NodeFacts

__all__ = [
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_NODE_RESERVATION",
    "ANNOTATION_SYSTEM_QOS",
    "BATCH_CPU",
    "cpus_of",
    "json_annotation",
    "node_facts",
    "quantity_or_zero",
]

BATCH_CPU = "kubernetes.io/batch-cpu"
# koordinator's colocation resources (batch-cpu and mid-cpu are counts of milli-cores, the others bytes).
EXTENDED_RESOURCES = (BATCH_CPU, "kubernetes.io/batch-memory", "kubernetes.io/mid-cpu", "kubernetes.io/mid-memory")
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS = "node.koordinator.sh/system-qos-resource"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"


def json_annotation(annotations: Mapping[str, str], key: str) -> Any:
    raw = annotations.get(key)
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def cpus_of(text: Any) -> frozenset[int]:
    if not isinstance(text, str) or not text.strip():
        return frozenset()
    try:
        return parse_cpu_list(text)
    except ValueError:
        return frozenset()


def quantity_or_zero(values: Mapping[str, str], key: str, *, milli: bool) -> int:
    """values[key] as a quantity (milli-units or units); 0 when absent or not a quantity: a facts reader
    reports what it can and never stops on one bad field."""
    raw = values.get(key)
    if raw is None:
        return 0
    try:
        q = parse_quantity(raw, field=key)
    except InputError:
        return 0
    return q.milli_value() if milli else q.value()


def node_facts(node: NodeRecord) -> NodeFacts:
    """Capacity, allocatable and reservations of the node, from its record and koordinator annotations."""
    quantity = quantity_or_zero

    cpu_cap = quantity(node.capacity, "cpu", milli=True)
    cpu_alloc = quantity(node.allocatable, "cpu", milli=True) or cpu_cap
    mem_cap = quantity(node.capacity, "memory", milli=False)
    mem_alloc = quantity(node.allocatable, "memory", milli=False) or mem_cap
    kubelet_reserved = max(cpu_cap - cpu_alloc, 0)
    reservation = json_annotation(node.annotations, ANNOTATION_NODE_RESERVATION) or {}
    anno_reserved = 0
    reserved_cpus = frozenset[int]()
    if isinstance(reservation, Mapping):
        resources = reservation.get("resources")
        if isinstance(resources, Mapping) and isinstance(resources.get("cpu"), str | int | float):
            try:
                anno_reserved = parse_quantity(str(resources["cpu"]), field="reservation.cpu").milli_value()
            except InputError:
                anno_reserved = 0
        reserved_cpus = cpus_of(reservation.get("reservedCPUs"))
        if reserved_cpus and not anno_reserved:
            anno_reserved = len(reserved_cpus) * 1000
    system = json_annotation(node.annotations, ANNOTATION_SYSTEM_QOS)
    exclusive = frozenset[int]()
    if isinstance(system, Mapping) and system.get("cpusetExclusive", True) is not False:
        exclusive = cpus_of(system.get("cpuset"))
    policy = json_annotation(node.annotations, ANNOTATION_KUBELET_CPU_MANAGER_POLICY)
    kubelet_policy = str(policy.get("policy", "none")) if isinstance(policy, Mapping) else "none"
    extended: dict[str, int] = {}
    for name in EXTENDED_RESOURCES:
        if name in node.allocatable:
            try:
                extended[name] = parse_quantity(node.allocatable[name], field=name).value()
            except InputError:
                pass  # unreadable counts as not offered: the allocatable eviction modes then hold
    batch_alloc = -1
    if BATCH_CPU in node.allocatable:
        try:
            batch_alloc = parse_quantity(node.allocatable[BATCH_CPU], field=BATCH_CPU).value()
        except InputError:
            batch_alloc = -1
    return NodeFacts(
        name=node.name,
        cpu_capacity_milli=cpu_cap,
        memory_capacity_bytes=mem_cap,
        cpu_allocatable_milli=cpu_alloc,
        memory_allocatable_bytes=mem_alloc,
        reserved_cpu_milli=max(kubelet_reserved, anno_reserved),
        reserved_cpus=reserved_cpus,
        system_exclusive_cpus=exclusive,
        batch_cpu_allocatable_milli=batch_alloc,
        extended_allocatable=MappingProxyType(extended),
        kubelet_cpu_manager_policy=kubelet_policy,
        annotations=node.annotations,
    )
