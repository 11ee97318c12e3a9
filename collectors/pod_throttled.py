"""pod_throttled: the share of CFS periods in which a pod (and container) was throttled since the last sample.

ratio = Δnr_throttled / Δnr_periods from `cpu.stat` (v1 and v2 name the fields alike); 0 when no period
elapsed (an unlimited cgroup never counts periods). Counters that went backwards re-prime.
"""

from __future__ import annotations

from hookserver.aio.hotgate import paced
from hookserver.errors import SystemFileError
from hookserver.store.timeseries import Labels
from hookserver.system.cgroupstats import CgroupStatReader

from collectors.base import BaseCollector, CycleContext

__all__ = ["PodThrottledCollector", "throttled_ratio"]


def throttled_ratio(prev: tuple[int, int], cur: tuple[int, int]) -> float | None:
    """(nr_periods, nr_throttled) pairs -> ratio; None when a counter went backwards."""
    d_periods = cur[0] - prev[0]
    d_throttled = cur[1] - prev[1]
    if d_periods < 0 or d_throttled < 0:
        return None
    return d_throttled / d_periods if d_periods > 0 else 0.0


class PodThrottledCollector(BaseCollector):
    name = "pod_throttled"

    def __init__(self, reader: CgroupStatReader, *, containers: bool = True) -> None:
        self.reader = reader
        self.containers = containers
        self._prev: dict[str, tuple[int, int]] = {}

    def _one(self, ctx: CycleContext, metric: str, rel: str, labels: Labels, seen: dict[str, tuple[int, int]]) -> None:
        cur = self.reader.throttle_counts(rel)
        if cur is None:
            ctx.missing += 1
            return
        seen[rel] = cur
        prev = self._prev.get(rel)
        if prev is not None:
            ratio = throttled_ratio(prev, cur)
            if ratio is not None:
                ctx.emit(metric, labels, ratio)

    def collect(self, ctx: CycleContext) -> None:
        seen: dict[str, tuple[int, int]] = {}
        for pod in paced(ctx.targets.pods):  # the hot gate: step aside between pods
            try:
                self._one(ctx, "pod_cpu_throttled_ratio", pod.rel_dir, pod.labels, seen)
                if self.containers:
                    for c in pod.containers:
                        self._one(ctx, "container_cpu_throttled_ratio", c.rel_dir, c.labels, seen)
            except SystemFileError as exc:
                ctx.note_error(f"pod {pod.namespace}/{pod.name}: {exc}")
        self._prev = seen
