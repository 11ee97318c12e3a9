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
from hookserver.capacity.quantities import ZERO, Pair
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


def _split(value: Pair, zones: int, bound: Sequence[int]) -> list[Pair]:
    """`GetPodNUMARequestAndUsage`: over the bound zones that exist, or over all when none does."""
    if not bound:
        return [_share(value, zones)] * zones
    part = _share(value, len(bound))
    return [part if i in bound else ZERO for i in range(zones)]


def _add(into: list[Pair], parts: Sequence[Pair]) -> None:
    for i, part in enumerate(parts):
        into[i] = into[i] + part


def _margin(capacity: ZoneAllocatable, strategy: ColocationStrategy) -> Pair:
    """`GetNodeSafetyMargin` on the zone: cpu `MultiplyMilliQuant`, memory `MultiplyQuant` (whole bytes)."""
    cpu = int(float(capacity.cpu_milli) * (float(100 - strategy.cpu_reclaim_threshold_percent) / 100.0))
    memory = int(float(capacity.memory_bytes) * (float(100 - strategy.memory_reclaim_threshold_percent) / 100.0))
    return Pair(cpu, memory * 1000)


def _zone_sums(result: CapacityResult, pods: Sequence[PodInput], zones: Sequence[ZoneAllocatable]
               ) -> tuple[list[Pair], list[Pair], list[Pair]]:
    """Per zone: HP requests, HP used, HP sum max(used, request), from the node formula's own pod lines (so a
    pod counts at the node and in the zones the same way); dangling usage is in both used sums."""
    n = len(zones)
    index = {zone.name: i for i, zone in enumerate(zones)}
    bound_of = {pod.uid: tuple(sorted({index[f"node-{node}"] for node in pod.numa_nodes if f"node-{node}" in index}))
                for pod in pods if pod.numa_nodes}
    requests, used, most = [ZERO] * n, [ZERO] * n, [ZERO] * n
    for line in result.pods:
        how = line.counted_as
        if how.startswith("skipped"):
            continue
        if how.startswith("dangling"):
            share = _split(_millis(line.used), n, ())
            _add(used, share)
            _add(most, share)
            continue
        bound = bound_of.get(line.uid, ())
        request = _split(_millis(line.request), n, bound)
        _add(requests, request)
        if line.usage is None or how == "request:no-sample":
            _add(used, request)
            _add(most, request)
            continue
        usage = _split(_millis(line.usage), n, bound)
        if how.startswith("lse"):  # an LSE pod reclaims no CPU: its CPU counts at the request
            _add(used, [Pair(r.cpu, u.memory) for r, u in zip(request, usage, strict=True)])
        else:
            _add(used, usage)
        _add(most, [u.max(r) for r, u in zip(request, usage, strict=True)])
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
        by_usage = (capacity - margin - floor - used[i]).clamp0()
        by_request = (capacity - margin - reserved - requests[i]).clamp0()
        by_max = (capacity - margin - floor - most[i]).clamp0()
        cpu_policy, memory_policy = strategy.cpu_calculate_policy, strategy.memory_calculate_policy
        cpu, cpu_hp = (by_max.cpu, most[i].cpu) if cpu_policy == "maxUsageRequest" else (by_usage.cpu, used[i].cpu)
        if memory_policy == "request":
            memory, memory_floor, memory_hp = by_request.memory, reserved.memory, requests[i].memory
        elif memory_policy == "maxUsageRequest":
            memory, memory_floor, memory_hp = by_max.memory, floor.memory, most[i].memory
        else:
            memory, memory_floor, memory_hp = by_usage.memory, floor.memory, used[i].memory
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
            ("HP requests", requests[i], "each pod's request over its NUMA nodes (or all zones), rounded up"),
            ("HP used", used[i], "usage split as the requests; no sample: request; LSE CPU: request; "
                                 f"dangling usage / {n}"),
            ("HP sum max(used, request)", most[i], "per pod and zone"),
        )
        out.append(ZoneOutcome(zone.name, capacity, cpu, memory, written_cpu, milli_bytes_quantity(memory), terms,
                               cpu_text, memory_text))
    return tuple(out)


def zone_totals(zones: Sequence[ZoneOutcome]) -> Mapping[str, int]:
    """The zones' figures added up (milli-cores, milli-bytes): beside the node's internal figure in the report."""
    return {"batch_cpu_milli": sum(z.batch_cpu_milli for z in zones),
            "batch_memory_milli_bytes": sum(z.batch_memory_milli_bytes for z in zones)}
