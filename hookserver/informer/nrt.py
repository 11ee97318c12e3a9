"""Writes this node's NodeResourceTopology (`topology.node.k8s.io/v1alpha1`, cluster-scoped, named after the
node) by server-side apply with the agent's field manager and `force=false`, like the capacity writer: the
object is created when missing, and a field another manager owns (koordlet still running, an operator's edit)
answers 409 naming it instead of being overwritten.

A 404 means the resource type itself is missing (an apply creates a missing object): the CRD is not
installed. That is a state, not an error storm: the result says so and the publisher reports it once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from hookserver.informer.apply_object import ApplyDelivery, ObjectApplier
from hookserver.informer.ssa import ApplyTransport

__all__ = ["NRT_RESOURCE_PATH", "NodeResourceTopologyWriter", "NrtDelivery"]

NRT_RESOURCE_PATH = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"

NrtDelivery = ApplyDelivery


class NodeResourceTopologyWriter(ObjectApplier):
    def __init__(self, transport: ApplyTransport, *, node_name: str, field_manager: str = "hookserver",
                 timeout_s: float = 10.0, sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__(
            transport, path=f"{NRT_RESOURCE_PATH}/{node_name}", field_manager=field_manager, timeout_s=timeout_s,
            sleep=sleep,
            missing=("crd_missing", "the NodeResourceTopology CRD (noderesourcetopologies.topology.node.k8s.io, "
                                    "v1alpha1) is not installed: koord-scheduler's NUMA and cpuset placement needs it"),
            grant="get/create/patch on noderesourcetopologies.topology.node.k8s.io",
        )
