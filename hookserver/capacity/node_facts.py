"""The Node record read the way koord-manager reads the Node: capacity, reserved, ratio, third-party, current offer.

Annotations (koordinator's `apis/extension` and `apis/slo/v1alpha1/node.go`):
  * `node.koordinator.sh/reservation`: `{"resources": {"cpu": "1", "memory": "2Gi"}, "reservedCPUs": "0-5"}`;
    `reservedCPUs` replaces the cpu figure with its CPU count;
  * `node.koordinator.sh/cpu-normalization-ratio`: a float; above 1 it scales batch-cpu;
  * `node.koordinator.sh/thirdPartyAllocations`: `{"allocations": [{"name", "priority", "resources"}]}`; the
    `koord-batch` entries' batch-cpu / batch-memory are taken off the offer (YARN and the like).
An annotation that does not parse is ignored with a note, as koord-manager logs and ignores it; a Node
without cpu and memory capacity is an InputError (there is nothing to compute from).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from hookserver.capacity.inputs import NodeFacts
from hookserver.capacity.quantities import ZERO, Pair
from hookserver.errors import InputError, QuantityError
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY, PUBLISHED_RESOURCES
from hookserver.podclass import cpu_memory
from hookserver.quantity import parse_quantity
from hookserver.store.records import NodeRecord
from hookserver.system.cpulist import parse_cpu_list

__all__ = [
    "ANNOTATION_CPU_NORMALIZATION_RATIO",
    "ANNOTATION_RESERVATION",
    "ANNOTATION_THIRD_PARTY",
    "node_facts",
]

ANNOTATION_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_THIRD_PARTY = "node.koordinator.sh/thirdPartyAllocations"


def _pair(values: Mapping[str, Any], where: str) -> Pair:
    return Pair(*cpu_memory(values, where))


def _reservation(raw: str, notes: list[str]) -> Pair | None:
    try:
        doc = json.loads(raw)
        if not isinstance(doc, Mapping):
            raise ValueError("not a JSON object")
        resources = doc.get("resources") or {}
        if not isinstance(resources, Mapping):
            raise ValueError("resources: not an object")
        reserved = _pair(resources, "resources")
        cpus = doc.get("reservedCPUs")
        if cpus:
            reserved = Pair(len(parse_cpu_list(str(cpus))) * 1000, reserved.memory)
        return reserved
    except (ValueError, InputError) as exc:
        notes.append(f"{ANNOTATION_RESERVATION} ignored: {exc}")
        return None


def _ratio(raw: str, notes: list[str]) -> float | None:
    try:
        ratio = float(raw)
    except ValueError:
        notes.append(f"{ANNOTATION_CPU_NORMALIZATION_RATIO}={raw!r} ignored: not a number")
        return None
    if not math.isfinite(ratio) or ratio <= 0:
        notes.append(f"{ANNOTATION_CPU_NORMALIZATION_RATIO}={raw!r} ignored: not a positive number")
        return None
    return ratio


def _third_party(raw: str, notes: list[str]) -> Pair:
    total = ZERO
    try:
        doc = json.loads(raw)
        allocations = doc.get("allocations") if isinstance(doc, Mapping) else None
        if not isinstance(allocations, list):
            raise ValueError("allocations: not a list")
        for index, entry in enumerate(allocations):
            if not isinstance(entry, Mapping) or entry.get("priority") != "koord-batch":
                continue
            resources = entry.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise ValueError(f"allocations[{index}].resources: not an object")
            cpu = resources.get(BATCH_CPU)
            memory = resources.get(BATCH_MEMORY)
            where = f"allocations[{index}].resources"
            total = total + Pair(
                parse_quantity(str(cpu), field=f"{where}[{BATCH_CPU}]").value() if cpu is not None else 0,
                parse_quantity(str(memory), field=f"{where}[{BATCH_MEMORY}]").value() if memory is not None else 0,
            )
    except (ValueError, InputError) as exc:
        notes.append(f"{ANNOTATION_THIRD_PARTY} ignored: {exc}")
        return ZERO
    return total


def _current(allocatable: Mapping[str, str], notes: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in PUBLISHED_RESOURCES:
        text = allocatable.get(name)
        if text is None:
            continue
        try:
            out[name] = parse_quantity(text, field=f"status.allocatable[{name}]").value()
        except QuantityError as exc:
            notes.append(f"current {name} unreadable: {exc}")
    return out


def node_facts(node: NodeRecord) -> NodeFacts:
    """NodeFacts of the Node record. InputError when its cpu/memory capacity is missing or unreadable."""
    if "cpu" not in node.capacity or "memory" not in node.capacity:
        raise InputError(f"node {node.name} has no cpu/memory in status.capacity", field="status.capacity")
    capacity = _pair(node.capacity, "status.capacity")
    allocatable = capacity
    if "cpu" in node.allocatable and "memory" in node.allocatable:
        allocatable = _pair(node.allocatable, "status.allocatable")
    notes: list[str] = []
    annotations = node.annotations
    reservation = annotations.get(ANNOTATION_RESERVATION)
    ratio = annotations.get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    third = annotations.get(ANNOTATION_THIRD_PARTY)
    return NodeFacts(
        name=node.name,
        capacity=capacity,
        allocatable=allocatable,
        annotation_reserved=_reservation(reservation, notes) if reservation else None,
        cpu_normalization_ratio=_ratio(ratio, notes) if ratio else None,
        third_party_batch=_third_party(third, notes) if third else ZERO,
        current=_current(node.allocatable, notes),
        owners=node.published_owners,
        notes=tuple(notes),
    )
