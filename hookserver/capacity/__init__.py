"""Capacity (areas layer, beside the predictor): batch and mid capacity published from the node itself.

koord-manager's NodeMetric and noderesource duties for this one node, so a cluster without koord-manager
still offers `kubernetes.io/batch-*` and `mid-*`: the formula (`formula.py`) over the agent's own fresh data
(`usage.py`, `node_facts.py`), the write and degrade rules (`rules.py`), the loop that decides and writes
through a sink (`publisher.py`; the apiserver writer lives in hookserver.informer), the NodeMetric keeper
(`nodemetric_keeper.py`), metrics under koord-manager's names (`metrics.py`) and `hookctl capacity`
(`report.py`). The same tick computes koord-manager's NUMA-level figures (`numa_formula.py`) for the
NodeResourceTopology's zones, published beside the node offer (`zone_offer.py`; `numa_link.py` joins the two
publishers). No module here talks to the apiserver or reads a file; the daemon wires the sinks in.
"""

from hookserver.capacity.formula import CapacityResult, PodLine, ResourceOutcome, Term, compute_capacity, node_value
from hookserver.capacity.inputs import HostAppUsage, NodeFacts, PodInput, UsageFacts, WindowedUsage
from hookserver.capacity.metrics import CapacityMetrics
from hookserver.capacity.node_facts import node_facts
from hookserver.capacity.nodemetric_keeper import NodeMetricKeeper
from hookserver.capacity.numa_formula import ZoneAllocatable, ZoneOutcome, compute_zone_capacity
from hookserver.capacity.numa_link import link_numa_zones
from hookserver.capacity.publisher import CapacityPublisher
from hookserver.capacity.ticks import TickOutcome
from hookserver.capacity.quantities import Pair
from hookserver.capacity.settings import CapacitySettings
from hookserver.capacity.sinks import CapacityDelivery, CapacitySink, LocalCapacitySink
from hookserver.capacity.usage import gather_inputs
from hookserver.capacity.zone_offer import ZoneOffers, zones_of_nrt

__all__ = [
    "CapacityDelivery",
    "CapacityMetrics",
    "CapacityPublisher",
    "CapacityResult",
    "CapacitySettings",
    "CapacitySink",
    "HostAppUsage",
    "LocalCapacitySink",
    "NodeFacts",
    "NodeMetricKeeper",
    "Pair",
    "PodInput",
    "PodLine",
    "ResourceOutcome",
    "Term",
    "TickOutcome",
    "UsageFacts",
    "WindowedUsage",
    "ZoneAllocatable",
    "ZoneOffers",
    "ZoneOutcome",
    "compute_capacity",
    "compute_zone_capacity",
    "gather_inputs",
    "link_numa_zones",
    "node_facts",
    "node_value",
    "zones_of_nrt",
]
