"""Which per-zone batch figures the NodeResourceTopology carries: those computed in the same tick as the node
offer that is on the Node, and only while that offer is this agent's.

koord-manager writes the zones in the loop that writes the Node, from the same calculation; here the node offer
is a held target (the smallest of the last `grow_hold_s`), so the zones of each computed tick are remembered and
the zones of the tick that produced the offer's value go out with it. A resource whose offer matches no
remembered tick (the informer was stale and the offer was only allowed to shrink) keeps the zones published
with it before. No offer by this agent (koord-manager publishes, another writer owns the fields, the offer was
withdrawn because colocation is off or the samples are stale) means no zone figures: the NRT never carries
batch figures this agent does not also stand behind on the Node.

The NRT's own publisher reads `published` on its own thread: it is replaced whole, never changed in place.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from hookserver.capacity.numa_formula import ZoneAllocatable, ZoneOutcome
from hookserver.errors import InputError
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.quantity import parse_quantity

__all__ = ["ZoneOffers", "zones_of_nrt"]

_NONE: Mapping[str, Mapping[str, str]] = MappingProxyType({})


def _figure(zone: ZoneOutcome, resource: str) -> str:
    return zone.batch_cpu if resource == BATCH_CPU else zone.batch_memory


class ZoneOffers:
    def __init__(self) -> None:
        self._ticks: collections.deque[tuple[float, dict[str, int], tuple[ZoneOutcome, ...]]] = \
            collections.deque(maxlen=4096)
        self.published: Mapping[str, Mapping[str, str]] = _NONE  # zone -> resource -> quantity, for the NRT
        self.published_from: dict[str, float] = {}  # resource -> the tick its zone figures were computed in

    def remember(self, at: float, node_values: Mapping[str, int], zones: tuple[ZoneOutcome, ...],
                 hold_s: float) -> None:
        """One tick's node figures and zones (kept as long as the growth hold looks back)."""
        self._ticks.append((at, dict(node_values), zones))
        while self._ticks and at - self._ticks[0][0] > hold_s:
            self._ticks.popleft()

    def settle(self, on_node: Mapping[str, int] | None) -> None:
        """The node offer this agent stands behind now (None: none): the zones that go with it."""
        if on_node is None:
            self.published, self.published_from = _NONE, {}
            return
        figures: dict[str, dict[str, str]] = {}
        sources: dict[str, float] = {}
        for resource in (BATCH_CPU, BATCH_MEMORY):
            value = on_node.get(resource)
            if value is None:
                continue
            chosen = self._tick_for(resource, value)
            if chosen is not None:
                at, zones = chosen
                for zone in zones:
                    figures.setdefault(zone.zone, {})[resource] = _figure(zone, resource)
                sources[resource] = at
            elif resource in self.published_from:  # published with this offer before: it stays
                for zone_name, resources in self.published.items():
                    if resource in resources:
                        figures.setdefault(zone_name, {})[resource] = resources[resource]
                sources[resource] = self.published_from[resource]
            elif self._ticks and self._ticks[-1][2]:  # an offer from before this process: the newest zones
                at, _, zones = self._ticks[-1]
                for zone in zones:
                    figures.setdefault(zone.zone, {})[resource] = _figure(zone, resource)
                sources[resource] = at
        self.published = MappingProxyType({z: MappingProxyType(dict(sorted(r.items())))
                                           for z, r in sorted(figures.items())})
        self.published_from = sources

    def _tick_for(self, resource: str, value: int) -> tuple[float, tuple[ZoneOutcome, ...]] | None:
        for at, values, zones in reversed(self._ticks):
            if zones and values.get(resource) == value:
                return at, zones
        return None

    def view(self) -> dict[str, Any]:
        return {"published": {z: dict(r) for z, r in self.published.items()},
                "computed_at": dict(self.published_from)}


def zones_of_nrt(document: Mapping[str, Any]) -> tuple[ZoneAllocatable, ...]:
    """The zones of a NodeResourceTopology document with their cpu / memory allocatable, as koord-manager reads
    them (every zone, in the document's order; a zone's missing or unreadable cpu or memory counts as 0). No
    zone with a cpu or memory entry: no zones (koord-manager's `isNRTResourcesCreated`)."""
    zones = document.get("zones") if isinstance(document, Mapping) else None
    if not isinstance(zones, Sequence):
        return ()
    out = []
    created = False
    for zone in zones:
        if not isinstance(zone, Mapping) or not isinstance(zone.get("name"), str):
            continue
        cpu = memory = 0
        for entry in zone.get("resources") or ():
            if not isinstance(entry, Mapping):
                continue
            created = created or entry.get("name") in ("cpu", "memory")
            try:
                if entry.get("name") == "cpu":
                    cpu = parse_quantity(entry.get("allocatable"), field="cpu").milli_value()
                elif entry.get("name") == "memory":
                    memory = parse_quantity(entry.get("allocatable"), field="memory").value()
            except InputError:
                continue
        out.append(ZoneAllocatable(str(zone["name"]), cpu, memory))
    return tuple(out) if created else ()
