"""Capacity metrics: koord-manager's series where it has one (so its dashboards keep working), hookserver's own
for the rest.

koord-manager (`pkg/slo-controller/metrics`, subsystem `slo_controller`):
    slo_controller_node_extended_resource_allocatable_internal{node,resource,unit}
        the computed batch/mid value before the normalization ratio and third-party allocations: *-cpu in cores
        (unit "integer", as koord-manager labels it), *-memory in bytes (unit "byte")
    slo_controller_node_resource_reconcile_count{status,reason}    Node status writes (reason updateNodeStatus)
    slo_controller_nodemetric_reconcile_count{status,reason}      NodeMetric create / spec update
The two counters are Go counters without `_total`: exported under that exact name, untyped.

hookserver:
    hookserver_capacity_offer{node,resource}      what this agent has on the Node now (absent when withdrawn)
    hookserver_capacity_computed{node,resource}   the last computed value (what would be published)
    hookserver_capacity_state{node,state}         1 for the current state (published, holding, degraded, ...)
    hookserver_capacity_yielded{node,manager}     1 while another field manager owns the fields
    hookserver_capacity_writes_total{node,action,result}
    hookserver_capacity_compute_seconds           one tick's gather + formula
    hookserver_capacity_last_write_timestamp_seconds
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from hookserver.koord_resources import BATCH_MEMORY, MID_MEMORY, PUBLISHED_RESOURCES
from hookserver.observability.unsuffixed import UnsuffixedCounter

__all__ = ["STATES", "CapacityMetrics"]

STATES = ("off", "disabled", "koord-manager", "yielded", "warming-up", "degraded", "holding", "published", "error")
_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class CapacityMetrics:
    def __init__(self, registry: CollectorRegistry | None, *, node: str) -> None:
        self.node = node
        self.internal = Gauge(
            "slo_controller_node_extended_resource_allocatable_internal",
            "the internal allocatable of node extended resources", ["node", "resource", "unit"], registry=registry,
        )
        self.node_resource_reconcile = UnsuffixedCounter(
            "slo_controller_node_resource_reconcile_count", "reconcile count of node resource", ("status", "reason"))
        self.nodemetric_reconcile = UnsuffixedCounter(
            "slo_controller_nodemetric_reconcile_count", "reconcile count of nodemetric", ("status", "reason"))
        if registry is not None:
            registry.register(self.node_resource_reconcile)
            registry.register(self.nodemetric_reconcile)
        self.offer = Gauge("hookserver_capacity_offer",
                           "Batch/mid capacity this agent has on its Node (status.allocatable; milli-cores, bytes); "
                           "absent when withdrawn", ["node", "resource"], registry=registry)
        self.computed = Gauge("hookserver_capacity_computed",
                              "The last computed batch/mid capacity (milli-cores, bytes)", ["node", "resource"],
                              registry=registry)
        self.state = Gauge("hookserver_capacity_state", "The capacity publisher's state (1 for the current one)",
                           ["node", "state"], registry=registry)
        self.yielded = Gauge("hookserver_capacity_yielded",
                             "1 while another field manager owns the batch/mid fields of the Node", ["node", "manager"],
                             registry=registry)
        self.writes = Counter("hookserver_capacity_writes", "Node status writes of the capacity publisher",
                              ["node", "action", "result"], registry=registry)
        self.compute_seconds = Histogram("hookserver_capacity_compute_seconds",
                                         "One capacity tick: inputs gathered and the formula computed",
                                         buckets=_BUCKETS_S, registry=registry)
        self.last_write = Gauge("hookserver_capacity_last_write_timestamp_seconds",
                                "When the publisher last changed the Node (unix seconds)", registry=registry)
        for action in ("write", "withdraw"):  # series from the start (0), so rate() and dashboards see them
            self.writes.labels(node, action, "ok")
        self._yielded_to: set[str] = set()
        self._offered: set[str] = set()
        self.set_state("off")

    def record_computed(self, values: Mapping[str, int], internal: Mapping[str, int]) -> None:
        for resource, value in values.items():
            self.computed.labels(self.node, resource).set(value)
        for resource, value in internal.items():
            memory = resource in (BATCH_MEMORY, MID_MEMORY)
            self.internal.labels(self.node, resource, "byte" if memory else "integer").set(
                value if memory else value / 1000.0)

    def record_offer(self, values: Mapping[str, int]) -> None:
        """What the Node holds of ours now; resources no longer there lose their series."""
        offered = {r for r in values if r in PUBLISHED_RESOURCES}
        for resource in self._offered - offered:
            self.offer.remove(self.node, resource)
        for resource in offered:
            self.offer.labels(self.node, resource).set(values[resource])
        self._offered = offered

    def record_write(self, action: str, result: str, at: float) -> None:
        self.writes.labels(self.node, action, result).inc()
        self.node_resource_reconcile.inc("succeeded" if result == "ok" else "failed", "updateNodeStatus")
        if result == "ok":
            self.last_write.set(at)

    def record_nodemetric(self, result: str) -> None:
        """koord-manager counts creates and spec updates; an unchanged spec is no reconcile."""
        if result == "unchanged":
            return
        reason = "createNodeMetric" if result == "created" else "updateNodeMetric"
        self.nodemetric_reconcile.inc("succeeded" if result in ("created", "updated") else "failed", reason)

    def set_state(self, state: str) -> None:
        for name in STATES:
            self.state.labels(self.node, name).set(1 if name == state else 0)

    def set_yielded(self, managers: Iterable[str]) -> None:
        wanted = set(managers)
        for gone in self._yielded_to - wanted:
            self.yielded.remove(self.node, gone)
        for manager in wanted:
            self.yielded.labels(self.node, manager).set(1)
        self._yielded_to = wanted
