"""system_resource: what the node uses outside pods and host applications: node − pods − host apps, ≥ 0.

It reads the totals node_resource, pod_resource and host_application left on the shared board this cycle
(they run first in the same interval group). Totals older than `max_age_s` are not combined: a system
value from mismatched instants would be noise, so the cycle emits nothing instead.
"""

from __future__ import annotations

from collectors.base import BaseCollector, CycleContext

__all__ = ["SystemResourceCollector", "system_usage"]


def system_usage(node: float, pods: float, host_apps: float) -> float:
    """node − pods − host applications, never negative (pods may briefly read ahead of /proc/stat)."""
    return max(node - pods - host_apps, 0.0)


class SystemResourceCollector(BaseCollector):
    name = "system_resource"
    requires = ("node_resource", "pod_resource")

    def __init__(self, *, max_age_s: float = 5.0) -> None:
        self.max_age_s = max_age_s

    def collect(self, ctx: CycleContext) -> None:
        shared = ctx.shared
        if ctx.now - shared.node_at > self.max_age_s or ctx.now - shared.pods_at > self.max_age_s:
            return
        host_fresh = ctx.now - shared.host_apps_at <= self.max_age_s
        host_cpu = shared.host_apps_cpu if host_fresh else 0.0
        host_mem = shared.host_apps_memory if host_fresh else 0.0
        if shared.node_cpu is not None and shared.pods_cpu is not None:
            system_cpu = system_usage(shared.node_cpu, shared.pods_cpu, host_cpu)
            ctx.emit("system_cpu_usage", ctx.node_labels, system_cpu)
            shared.system_cpu, shared.system_at = system_cpu, ctx.now
        if shared.node_memory is not None and shared.pods_memory is not None:
            ctx.emit("system_memory_usage", ctx.node_labels, system_usage(shared.node_memory, shared.pods_memory, host_mem))
