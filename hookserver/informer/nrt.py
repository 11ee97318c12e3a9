"""Writes this node's NodeResourceTopology (`topology.node.k8s.io/v1alpha1`, cluster-scoped, named after the
node) by server-side apply with the agent's field manager and `force=false`, like the capacity writer: the
object is created when missing, and a field another manager owns (koordlet still running, an operator's edit)
answers 409 naming it instead of being overwritten.

A 404 means the resource type itself is missing (an apply creates a missing object): the CRD is not
installed. That is a state, not an error storm: the result says so and the publisher reports it once.

The zones are shared with koord-manager: where it runs, its batchresource plugin writes each zone's
batch-cpu / batch-memory into this object (an Update, so its manager then owns the whole `zones` list, which
the CRD declares without a list type, hence atomic). From then on an apply of our zones, which lack its
entries, would conflict on `.zones` at every tick, and the cpu-shared-pools and pod-cpu-allocs annotations
koord-scheduler reads would stop following the node. koordlet keeps writing by merging koord-manager's entries
into its own zones (a read this agent's ClusterRole does not grant); here a conflict on the zones alone
yields them: the same apply is sent again without `zones` (the zones stay as they are, koord-manager's
figures included), and later applies leave them out while this process runs. A conflict on any other field is
still a conflict. The zones' cpu and memory come from the node's topology, which does not change while it
runs; a restart takes them back if they did.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from hookserver.informer.apply_object import ApplyDelivery, ObjectApplier
from hookserver.informer.ssa import ApplyTransport

__all__ = ["NRT_RESOURCE_PATH", "NodeResourceTopologyWriter", "NrtDelivery"]

NRT_RESOURCE_PATH = "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies"

NrtDelivery = ApplyDelivery

log = logging.getLogger(__name__)


def _zones_only(delivery: ApplyDelivery) -> bool:
    """A conflict whose every field is the zones list or inside it."""
    return delivery.result == "conflict" and bool(delivery.conflicts) and all(
        path == ".zones" or path.startswith((".zones.", ".zones[")) for _, path in delivery.conflicts
    )


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

    zones_owner = ""  # the manager the zones were yielded to ("": this agent applies them)

    def apply(self, document: Mapping[str, Any]) -> ApplyDelivery:
        if self.zones_owner:
            return self._without_zones(document)
        delivery = super().apply(document)
        if "zones" in document and _zones_only(delivery):
            self.zones_owner = ", ".join(dict.fromkeys(manager for manager, _ in delivery.conflicts))
            log.warning("NodeResourceTopology: the zones are written by %s (koord-manager's per-zone batch "
                        "figures); they are left to it and the rest of the report keeps being applied",
                        self.zones_owner)
            return self._without_zones(document)
        return delivery

    def _without_zones(self, document: Mapping[str, Any]) -> ApplyDelivery:
        delivery = super().apply({k: v for k, v in document.items() if k != "zones"})
        if delivery.result == "ok":
            return ApplyDelivery("ok", f"zones left to {self.zones_owner}", delivery.attempts)
        return delivery
