"""Joins the capacity publisher and the NodeResourceTopology publisher for NUMA-level batch capacity.

koord-manager reads the zones (and their cpu / memory allocatable) from the NRT object and writes each zone's
batch-cpu / batch-memory back into it. Here both ends are in one process: the capacity tick reads the zones of
the NRT document the topology publisher last built, and the topology publisher adds the zone figures the
capacity publisher settled with its node offer. Two callables, so neither publisher holds the other and each
keeps its own thread and interval. The daemon calls this once, after building both.
"""

from __future__ import annotations

from hookserver.capacity.publisher import CapacityPublisher
from hookserver.capacity.zone_offer import zones_of_nrt
from hookserver.topology.publisher import TopologyPublisher

__all__ = ["link_numa_zones"]


def link_numa_zones(capacity: CapacityPublisher, topology: TopologyPublisher) -> None:
    """From now on the capacity tick computes the zones of `topology`'s document, and that document carries the
    zone figures of the offer `capacity` stands behind (none while it publishes none)."""
    capacity.numa_zones = lambda: zones_of_nrt(topology.document)
    topology.zone_resources = lambda: capacity.zone_offers.published
