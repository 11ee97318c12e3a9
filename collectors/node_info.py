"""node_info: CPU topology (CPU, core, socket, NUMA node, L3) and per-NUMA memory, every 60 s.

The topology is not a time series: it is kept whole as a static value in the store (`node_topology`), for
the QoS planners (cpuset suppress picks whole cores per NUMA node) and for export as an info metric. The
counts and per-NUMA memory are also written as series, so `hookctl metrics` can show them.
"""

from __future__ import annotations

from hookserver.store.timeseries import make_labels
from hookserver.system.roots import SystemRoots
from hookserver.system.topology import NodeTopology, read_node_topology

from collectors.base import BaseCollector, CycleContext

__all__ = ["NODE_TOPOLOGY_KEY", "NodeInfoCollector"]

NODE_TOPOLOGY_KEY = "node_topology"


class NodeInfoCollector(BaseCollector):
    name = "node_info"

    def __init__(self, roots: SystemRoots) -> None:
        self.roots = roots
        self.latest: NodeTopology | None = None

    def collect(self, ctx: CycleContext) -> None:
        topo = read_node_topology(self.roots)
        if not topo.cpus:
            ctx.missing += 1
        self.latest = topo
        ctx.statics[NODE_TOPOLOGY_KEY] = topo
        labels = ctx.node_labels
        if topo.cpus:
            ctx.emit("node_cpus", labels, float(topo.num_cpus))
            ctx.emit("node_cpu_cores", labels, float(topo.num_cores))
            ctx.emit("node_cpu_sockets", labels, float(topo.num_sockets))
            if not ctx.shared.ncpu:
                ctx.shared.ncpu = sum(1 for c in topo.cpus if c.online)
        for numa in topo.numa:
            numa_labels = tuple(sorted((*labels, *make_labels(numa=str(numa.node)))))
            ctx.emit("numa_memory_total", numa_labels, float(numa.total_bytes))
            ctx.emit("numa_memory_used", numa_labels, float(numa.used_bytes))
