"""koord-manager's NUMA-level batch capacity (`batchresource` `calculateOnNUMALevel`, the NUMA helpers of
`noderesource/plugins/util`), one figure per NodeResourceTopology zone, from the same tick's node figures.

koord-scheduler places NUMA-aware batch pods by the `batch-cpu` / `batch-memory` of each zone, so the agent
that publishes the node's batch offer publishes these beside it. NUMA-level metrics are not reported, so
koord-manager approximates, and so does this module, term for term:

  zone capacity  = the zone's cpu / memory *allocatable* in the NRT (what koordlet or this agent wrote)
  safety margin  = zone capacity x (100 - reclaimThresholdPercent) %        (truncated, as at node level)
  reserved       = max(kubelet reserved, node.koordinator.sh/reservation) / zones     (rounded up)
  system used    = (system usage + host applications above batch) / zones           (rounded up)
  a pod          = its request and usage split over the NUMA nodes koord-scheduler bound it to
                   (resource-status numaNodeResources), else over every zone; each share rounded up
  dangling usage = split over every zone (rounded up)
  then the node's policy formula (`CalculateBatchResourceByPolicy`) per zone, with the zone's capacity in
  the batch threshold cap. Not per zone: third-party allocations (koord-manager subtracts them from the
  node figure only).

"Rounded up" is `DivideResourceList`: ceil(milli-value / zones) as a float64, a milli-quantity. For memory
that is thousandths of a byte, so a zone's batch-memory can be a fractional quantity ("…500m"); it is kept
here in milli-bytes and written exactly as apimachinery prints such a quantity. batch-cpu is an integer count
of milli-cores ("12k" = 12 cores), times the node's cpu-normalization ratio when above 1 with no rounding
(`MultiplyMilliQuant` in `UpdateNRTZoneListIfNeeded`, so "1101100m" can appear).

Which pod goes to which zone: by zone name `node-<id>`. koord-manager indexes the name-sorted zone list by
position, which is the same for up to ten NUMA nodes and attributes a pod bound to node 2 to `node-10` on a
node with eleven or more; here the NUMA id decides.

Pure: the node's facts, the node formula's result (its pod lines: who counts, at what) and the zones in; one
`ZoneOutcome` per zone out, every term kept for `hookctl capacity`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hookserver.capacity.formula import CapacityResult
from hookserver.capacity.inputs import NodeFacts, PodInput
from hookserver.capacity.quantities import Pair
from hookserver.kubewire import cpu_quantity, decimal_quantity, memory_quantity
from hookserver.slo.colocation import ColocationStrategy

__all__ = ["ZoneAllocatable", "ZoneOutcome", "compute_zone_capacity", "milli_bytes_quantity", "zone_cpu_quantity",
           "zone_totals"]


@dataclass(frozen=True, slots=True)
class ZoneAllocatable:
    """One NRT zone's allocatable cpu (milli-cores) and memory (bytes): the zone's capacity in the formula."""

    name: str
    cpu_milli: int
    memory_bytes: int


@dataclass(frozen=True, slots=True)
class ZoneOutcome:
    """One zone's batch figures. Memory is in milli-bytes (the even split keeps thousandths of a byte)."""

    zone: str
    capacity: Pair  # cpu milli-cores, memory milli-bytes
    batch_cpu_milli: int  # before the normalization ratio (what the node's internal figure compares with)
    batch_memory_milli_bytes: int
    batch_cpu: str  # the quantities written into the zone's batch-cpu / batch-memory
    batch_memory: str
    terms: tuple[tuple[str, Pair, str], ...]  # (name, value in milli-cores / milli-bytes, how)
    cpu_formula: str
    memory_formula: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "zone": self.zone, "batch_cpu": self.batch_cpu, "batch_memory": self.batch_memory,
            "batch_cpu_milli": self.batch_cpu_milli, "batch_memory_milli_bytes": self.batch_memory_milli_bytes,
            "cpu_formula": self.cpu_formula, "memory_formula": self.memory_formula,
            "terms": [{"name": name, "cpu_milli": value.cpu, "memory_milli_bytes": value.memory, "how": how}
                      for name, value, how in self.terms],
        }


def zone_cpu_quantity(milli: int, ratio: float | None) -> str:
    """batch-cpu of a zone as koord-manager writes it: `NewQuantity(milli, DecimalSI)`, or with a normalization
    ratio above 1 `MultiplyMilliQuant` of that quantity (thousandths of the count, truncated, not rounded up)."""
    if ratio is not None and ratio > 1.0:
        return cpu_quantity(int(float(milli * 1000) * ratio))
    return decimal_quantity(milli)


def milli_bytes_quantity(milli_bytes: int) -> str:
    """A BinarySI quantity of `milli_bytes` thousandths of a byte as apimachinery prints it: whole bytes in the
    binary form ("3Gi"), a fraction of a byte in the decimal milli form ("1073741823500m")."""
    if milli_bytes % 1000 == 0:
        return memory_quantity(milli_bytes // 1000)
    return cpu_quantity(milli_bytes)  # the decimal form of a milli-value: the same digits as a CPU milli-quantity


def _ceil_div(value: int, parts: int) -> int:
    """`DivideResourceList` on one milli-value: ceil(float64(milli) / parts)."""
    return int(math.ceil(float(value) / float(parts)))


def _share(value: Pair, parts: int) -> Pair:
    return Pair(_ceil_div(value.cpu, parts), _ceil_div(value.memory, parts))


def _millis(value: Pair) -> Pair:
    """cpu milli-cores stay; memory bytes become milli-bytes (the unit the split works in)."""
    return Pair(value.cpu, value.memory * 1000)


class _Sums:
    """Per-zone running sums of cpu milli-cores and memory milli-bytes, in plain integers: a tick adds every pod
    to every zone (200 pods on 8 zones: thousands of additions, kept off Pair objects)."""

    __slots__ = ("cpu", "memory")

    def __init__(self, zones: int) -> None:
        self.cpu = [0] * zones
        self.memory = [0] * zones

    def add(self, cpu: int, memory: int, zones: Sequence[int]) -> None:
        for i in zones:
            self.cpu[i] += cpu
            self.memory[i] += memory

    def pair(self, i: int) -> Pair:
        return Pair(self.cpu[i], self.memory[i])


def _margin(capacity: ZoneAllocatable, strategy: ColocationStrategy) -> Pair:
    """`GetNodeSafetyMargin` on the zone: cpu `MultiplyMilliQuant`, memory `MultiplyQuant` (whole bytes)."""
    cpu = int(float(capacity.cpu_milli) * (float(100 - strategy.cpu_reclaim_threshold_percent) / 100.0))
    memory = int(float(capacity.memory_bytes) * (float(100 - strategy.memory_reclaim_threshold_percent) / 100.0))
    return Pair(cpu, memory * 1000)


def _zone_sums(result: CapacityResult, pods: Sequence[PodInput], zones: Sequence[ZoneAllocatable]
               ) -> tuple[_Sums, _Sums, _Sums]:
    """Per zone: HP requests, HP used, HP sum max(used, request), from the node formula's own pod lines (so a
    pod counts at the node and in the zones the same way). `GetPodNUMARequestAndUsage`: a pod's figures are split
    over the bound zones that exist, or over all when none does; dangling usage over all, in both used sums."""
    n = len(zones)
    every = range(n)
    index = {zone.name: i for i, zone in enumerate(zones)}
    bound_of = {pod.uid: tuple(sorted({index[f"node-{node}"] for node in pod.numa_nodes if f"node-{node}" in index}))
                for pod in pods if pod.numa_nodes}
    requests, used, most = _Sums(n), _Sums(n), _Sums(n)
    for line in result.pods:
        how = line.counted_as
        if how.startswith("skipped"):
            continue
        if how.startswith("dangling"):
            share = _share(_millis(line.used), n)
            used.add(share.cpu, share.memory, every)
            most.add(share.cpu, share.memory, every)
            continue
        bound = bound_of.get(line.uid) or every
        parts = len(bound)
        request = _share(_millis(line.request), parts)
        requests.add(request.cpu, request.memory, bound)
        if line.usage is None or how == "request:no-sample":
            used.add(request.cpu, request.memory, bound)
            most.add(request.cpu, request.memory, bound)
            continue
        usage = _share(_millis(line.usage), parts)
        if how.startswith("lse"):  # an LSE pod reclaims no CPU: its CPU counts at the request
            used.add(request.cpu, usage.memory, bound)
        else:
            used.add(usage.cpu, usage.memory, bound)
        most.add(max(usage.cpu, request.cpu), max(usage.memory, request.memory), bound)
    return requests, used, most


def compute_zone_capacity(
    strategy: ColocationStrategy,
    node: NodeFacts,
    result: CapacityResult,
    pods: Sequence[PodInput],
    zones: Sequence[ZoneAllocatable],
) -> tuple[ZoneOutcome, ...]:
    """batch-cpu and batch-memory of every zone, from the node formula's `result` of the same tick."""
    n = len(zones)
    if n == 0:
        return ()
    requests, used, most = _zone_sums(result, pods, zones)
    system = _share(_millis(result.system_used), n)
    reserved = _share(_millis(node.reserved), n)
    floor = system.max(reserved)
    out = []
    for i, zone in enumerate(zones):
        capacity = Pair(zone.cpu_milli, zone.memory_bytes * 1000)
        margin = _margin(zone, strategy)
        zone_requests, zone_used, zone_most = requests.pair(i), used.pair(i), most.pair(i)
        by_usage = (capacity - margin - floor - zone_used).clamp0()
        by_request = (capacity - margin - reserved - zone_requests).clamp0()
        by_max = (capacity - margin - floor - zone_most).clamp0()
        cpu_policy, memory_policy = strategy.batch_cpu_policy(), strategy.batch_memory_policy()
        cpu, cpu_hp = (by_max.cpu, zone_most.cpu) if cpu_policy == "maxUsageRequest" else (by_usage.cpu, zone_used.cpu)
        if memory_policy == "request":
            memory, memory_floor, memory_hp = by_request.memory, reserved.memory, zone_requests.memory
        elif memory_policy == "maxUsageRequest":
            memory, memory_floor, memory_hp = by_max.memory, floor.memory, zone_most.memory
        else:
            memory, memory_floor, memory_hp = by_usage.memory, floor.memory, zone_used.memory
        cpu_text = f"max({capacity.cpu} - {margin.cpu} - {floor.cpu} - {cpu_hp}, 0) = {cpu}m"
        memory_text = (f"max({capacity.memory} - {margin.memory} - {memory_floor} - {memory_hp}, 0) = "
                       f"{memory} milli-bytes")
        if strategy.batch_cpu_threshold_percent is not None:
            cap = int(float(zone.cpu_milli) * (float(strategy.batch_cpu_threshold_percent) / 100))
            if cap < cpu:
                cpu, cpu_text = cap, f"{cpu_text}; capped at {cap}m (batchCPUThresholdPercent)"
        if strategy.batch_memory_threshold_percent is not None:
            cap = int(float(zone.memory_bytes) * (float(strategy.batch_memory_threshold_percent) / 100)) * 1000
            if cap < memory:
                memory, memory_text = cap, f"{memory_text}; capped at {cap} (batchMemoryThresholdPercent)"
        ratio = node.cpu_normalization_ratio
        written_cpu = zone_cpu_quantity(cpu, ratio)
        if ratio is not None and ratio > 1.0:
            cpu_text += f"; x cpu-normalization-ratio {ratio:g} = {written_cpu}"
        terms = (
            ("zone allocatable", capacity, "the zone's cpu / memory allocatable in the NodeResourceTopology"),
            ("safety margin", margin, "zone allocatable x (100 - reclaimThresholdPercent) %"),
            ("reserved / zones", reserved, f"max(kubelet reserved, annotation reserved) / {n}, rounded up"),
            ("system used / zones", system, f"(system usage + host apps above batch) / {n}, rounded up"),
            ("max(system used, reserved)", floor, ""),
            ("HP requests", zone_requests, "each pod's request over its NUMA nodes (or all zones), rounded up"),
            ("HP used", zone_used, "usage split as the requests; no sample: request; LSE CPU: request; "
                                   f"dangling usage / {n}"),
            ("HP sum max(used, request)", zone_most, "per pod and zone"),
        )
        out.append(ZoneOutcome(zone.name, capacity, cpu, memory, written_cpu, milli_bytes_quantity(memory), terms,
                               cpu_text, memory_text))
    return tuple(out)


def zone_totals(zones: Sequence[ZoneOutcome]) -> Mapping[str, int]:
    """The zones' figures added up (milli-cores, milli-bytes): beside the node's internal figure in the report."""
    return {"batch_cpu_milli": sum(z.batch_cpu_milli for z in zones),
            "batch_memory_milli_bytes": sum(z.batch_memory_milli_bytes for z in zones)}
