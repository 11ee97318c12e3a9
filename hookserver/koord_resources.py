"""Koordinator's extended resource names on the Node and in pod specs (`apis/extension/resource.go`).

A shared helper outside the layers: the batch hook, the collectors, the QoS readers and the capacity
publisher all name these resources, and one spelling keeps them from drifting apart.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "ANNOTATION_EXTENDED_RESOURCE_SPEC", "BATCH_CPU", "BATCH_MEMORY", "LEGACY_BATCH_NAMES", "MID_CPU", "MID_MEMORY",
    "PUBLISHED_RESOURCES",
]

BATCH_CPU = "kubernetes.io/batch-cpu"  # integer milli-cores
BATCH_MEMORY = "kubernetes.io/batch-memory"  # bytes
# The deprecated names (`apis/extension/deprecated.go`), read where the current one is absent.
LEGACY_BATCH_NAMES: Mapping[str, str] = MappingProxyType(
    {BATCH_CPU: "koordinator.sh/batch-cpu", BATCH_MEMORY: "koordinator.sh/batch-memory"})
MID_CPU = "kubernetes.io/mid-cpu"  # integer milli-cores
MID_MEMORY = "kubernetes.io/mid-memory"  # bytes
# What koord-manager's noderesource controller (and hookserver's capacity publisher) writes into the Node's
# status.capacity and status.allocatable, in its order.
PUBLISHED_RESOURCES = (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)
# koord-manager's webhook copies each app container's batch-cpu/batch-memory requests and limits from the pod
# spec into this pod annotation (`pkg/webhook/pod/mutating/extended_resource_spec.go`): the batch hook sets the
# cgroups from it, and the store reads it for a pod whose spec the agent lacks (`store/annotated_specs.py`).
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
