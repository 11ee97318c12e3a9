"""Koordinator's extended resource names on the Node and in pod specs (`apis/extension/resource.go`).

A shared helper outside the layers: the batch hook, the collectors, the QoS readers and the capacity
publisher all name these resources, and one spelling keeps them from drifting apart.
"""

from __future__ import annotations

__all__ = ["BATCH_CPU", "BATCH_MEMORY", "MID_CPU", "MID_MEMORY", "PUBLISHED_RESOURCES"]

BATCH_CPU = "kubernetes.io/batch-cpu"  # integer milli-cores
BATCH_MEMORY = "kubernetes.io/batch-memory"  # bytes
MID_CPU = "kubernetes.io/mid-cpu"  # integer milli-cores
MID_MEMORY = "kubernetes.io/mid-memory"  # bytes
# What koord-manager's noderesource controller (and hookserver's capacity publisher) writes into the Node's
# status.capacity and status.allocatable, in its order.
PUBLISHED_RESOURCES = (BATCH_CPU, BATCH_MEMORY, MID_CPU, MID_MEMORY)
