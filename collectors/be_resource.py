"""be_resource: best-effort CPU usage, request and real limit: the inputs of koordlet's BE CPU eviction.

* usage: the rate of the kubelet's BestEffort QoS cgroup (`kubepods/besteffort`, or the systemd slice),
  which holds every BE pod including sandboxes; where that cgroup is missing, the sum of BE pods' usage.
* request: the sum of BE pods' `kubernetes.io/batch-cpu` requests (milli-cores), in cores.
* real limit: what BE may use right now: min(quota / period, cpuset size) of the BE QoS cgroup, or the
  node's CPU count when neither is set (nothing suppresses BE).
"""

from __future__ import annotations

from hookserver.errors import SystemFileError
from hookserver.system.cgroupstats import CgroupStatReader

from collectors.base import BaseCollector, CycleContext

__all__ = ["BEResourceCollector"]


class BEResourceCollector(BaseCollector):
    name = "be_resource"

    def __init__(self, reader: CgroupStatReader) -> None:
        self.reader = reader
        self._prev: tuple[float, int] | None = None

    def collect(self, ctx: CycleContext) -> None:
        labels = ctx.node_labels
        be_pods = [p for p in ctx.targets.pods if p.is_be]
        ctx.emit("be_cpu_request", labels, sum(p.cpu_request_cores for p in be_pods))
        be_dir = ctx.targets.be_dir
        try:
            usage = self.reader.cpu_usage_ns(be_dir)
            limit = self.reader.cpu_limit(be_dir)
        except SystemFileError as exc:
            ctx.note_error(f"BE QoS cgroup {be_dir}: {exc}")
            return
        if usage is not None:
            prev, self._prev = self._prev, (ctx.mono, usage)
            if prev is not None and ctx.mono > prev[0] and usage >= prev[1]:
                ctx.emit("be_cpu_usage", labels, (usage - prev[1]) / ((ctx.mono - prev[0]) * 1e9))
        elif ctx.shared.pods_at == ctx.now and ctx.shared.pods_cpu is not None:
            ctx.emit("be_cpu_usage", labels, sum(ctx.shared.pod_cpu.get(p.uid, 0.0) for p in be_pods))
        real_limit = limit.cores if limit is not None else 0.0
        if real_limit <= 0.0:
            real_limit = float(ctx.shared.ncpu)
        if real_limit > 0.0:
            ctx.emit("be_cpu_real_limit", labels, real_limit)
