"""node_resource: node CPU cores in use from /proc/stat deltas, and memory used = MemTotal - MemAvailable.

CPU is Δbusy / Δtotal × ncpu over two readings of the aggregate `cpu` line, so the result needs neither a
wall clock nor USER_HZ and cannot be skewed by a late tick. The first cycle only primes the counters.
"""

from __future__ import annotations

from hookserver.system.procfs import CpuTicks, read_cpu_ticks, read_meminfo
from hookserver.system.roots import SystemRoots

from collectors.base import BaseCollector, CycleContext

__all__ = ["NodeResourceCollector"]


class NodeResourceCollector(BaseCollector):
    name = "node_resource"

    def __init__(self, roots: SystemRoots) -> None:
        self.roots = roots
        self._prev: CpuTicks | None = None

    def collect(self, ctx: CycleContext) -> None:
        labels = ctx.node_labels
        ticks = read_cpu_ticks(self.roots)
        if ticks is not None:
            prev, self._prev = self._prev, ticks
            ctx.shared.ncpu = ticks.ncpu
            if prev is not None:
                d_busy = ticks.busy - prev.busy
                d_total = ticks.total - prev.total
                if d_total > 0 and d_busy >= 0:
                    cores = d_busy / d_total * ticks.ncpu
                    ctx.emit("node_cpu_usage", labels, cores)
                    ctx.shared.node_cpu = cores
                    ctx.shared.node_at = ctx.now
        else:
            ctx.missing += 1
        mem = read_meminfo(self.roots)
        if mem is None:
            ctx.missing += 1
            return
        ctx.emit("node_memory_usage", labels, float(mem.used))
        ctx.emit("node_memory_usage_with_cache", labels, float(mem.used_with_page_cache))
        ctx.emit("node_memory_total", labels, float(mem.total))
        ctx.shared.node_memory = float(mem.used)
        ctx.shared.node_at = ctx.now
