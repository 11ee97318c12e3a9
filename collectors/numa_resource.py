"""numa_resource: each NUMA node's CPU cores and memory in use, and the system's share of them: the series
behind NodeMetric's `numaUsages` (koordinator #3138; koordlet's node_resource and system_resource collectors).

* CPU of a NUMA node = Σ over its CPUs (`node<N>/cpulist`) of Δbusy / Δtotal of the CPU's /proc/stat line:
  the node_resource method per CPU, so no wall clock or USER_HZ, and the nodes add up to the node figure. A
  CPU without a line (offline) or whose counters went backwards adds nothing; the first cycle only primes.
* Memory of a NUMA node = koordlet's `NUMAMemUsageBytes` (`hookserver.system.numa_usage.NumaMemory.used`).
* System CPU of a NUMA node = the node's system CPU (system_resource, this cycle) × this node's share of the
  NUMA CPU usage, as koordlet apportions it: no cgroup reports CPU time per NUMA node.
* System memory of a NUMA node = its memory − Σ pods' memory on it (`memory.numa_stat`), never negative;
  host applications are not taken out (koordlet does not collect them per NUMA node either).

A host without /sys/devices/system/node/node* emits nothing, so the report leaves `numaUsages` out.
"""

from __future__ import annotations

from hookserver.aio.hotgate import paced
from hookserver.errors import SystemFileError
from hookserver.store.timeseries import Labels, make_labels
from hookserver.system.cgroupstats import CgroupStatReader
from hookserver.system.numa_usage import CpuTick, read_numa_cpus, read_numa_memory, read_per_cpu_ticks
from hookserver.system.roots import SystemRoots

from collectors.base import BaseCollector, CycleContext

__all__ = ["NumaResourceCollector", "numa_cpu_usage"]


def numa_cpu_usage(prev: dict[int, CpuTick], cur: dict[int, CpuTick], numa_cpus: dict[int, frozenset[int]]) -> dict[int, float]:
    """NUMA node -> cores in use between two per-CPU readings; a node none of whose CPUs has a valid delta is left out."""
    out: dict[int, float] = {}
    for node, cpus in numa_cpus.items():
        cores = 0.0
        counted = False
        for cpu in cpus:
            a, b = prev.get(cpu), cur.get(cpu)
            if a is None or b is None:
                continue
            d_busy, d_total = b.busy - a.busy, b.total - a.total
            if d_total <= 0 or d_busy < 0:
                continue
            cores += d_busy / d_total
            counted = True
        if counted:
            out[node] = cores
    return out


class NumaResourceCollector(BaseCollector):
    name = "numa_resource"

    def __init__(self, roots: SystemRoots, reader: CgroupStatReader, *, max_age_s: float = 5.0) -> None:
        self.roots = roots
        self.reader = reader
        self.max_age_s = max_age_s
        self._prev: dict[int, CpuTick] | None = None

    def _labels(self, ctx: CycleContext, node: int) -> Labels:
        return tuple(sorted((*ctx.node_labels, *make_labels(numa=str(node)))))

    def collect(self, ctx: CycleContext) -> None:
        numa_cpus = read_numa_cpus(self.roots)
        memory = read_numa_memory(self.roots)
        if not numa_cpus and not memory:
            return  # no NUMA nodes in sysfs: nothing to report, not a failure
        ticks = read_per_cpu_ticks(self.roots)
        if ticks is None:
            ctx.missing += 1
        prev, self._prev = self._prev, ticks
        cpu = numa_cpu_usage(prev, ticks, numa_cpus) if prev is not None and ticks is not None else {}
        for node, cores in sorted(cpu.items()):
            ctx.emit("numa_cpu_usage", self._labels(ctx, node), cores)
        for mem in memory:
            ctx.emit("numa_memory_usage", self._labels(ctx, mem.node), float(mem.used))
        shared = ctx.shared
        if cpu and shared.system_cpu is not None and ctx.now - shared.system_at <= self.max_age_s:
            total = sum(cpu.values())
            for node, cores in sorted(cpu.items()):
                share = shared.system_cpu * cores / total if total > 0 else 0.0
                ctx.emit("numa_system_cpu_usage", self._labels(ctx, node), share)
        if memory:
            pods = self._pods_memory(ctx)
            for mem in memory:
                ctx.emit("numa_system_memory_usage", self._labels(ctx, mem.node), float(max(mem.used - pods.get(mem.node, 0), 0)))

    def _pods_memory(self, ctx: CycleContext) -> dict[int, int]:
        """Σ pods' memory per NUMA node; a pod whose file is gone or malformed is left out, as koordlet does."""
        out: dict[int, int] = {}
        for pod in paced(ctx.targets.pods):  # the hot gate: step aside between pods
            try:
                found = self.reader.memory_numa_bytes(pod.rel_dir)
            except SystemFileError as exc:
                ctx.note_error(f"pod {pod.namespace}/{pod.name}: {exc}")
                continue
            for node, value in (found or {}).items():
                out[node] = out.get(node, 0) + value
        return out
