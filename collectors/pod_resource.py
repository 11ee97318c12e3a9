"""pod_resource: CPU cores and memory (with and without page cache) of every pod and container cgroup.

CPU is the delta of the cgroup's cumulative usage (v1 `cpuacct.usage`, v2 `cpu.stat usage_usec`) over the
delta of a monotonic clock. A cgroup seen for the first time only primes its counter; a counter that went
backwards (the cgroup was recreated) re-primes. A cgroup that is gone gives no sample and counts as missing.
"""

from __future__ import annotations

from hookserver.aio.hotgate import paced
from hookserver.errors import SystemFileError
from hookserver.store.timeseries import Labels
from hookserver.system.cgroupstats import CgroupStatReader

from collectors.base import BaseCollector, CycleContext

__all__ = ["PodResourceCollector"]


_NAMES = {
    level: (f"{level}_cpu_usage", f"{level}_memory_usage", f"{level}_memory_usage_with_cache")
    for level in ("pod", "container")
}


class PodResourceCollector(BaseCollector):
    name = "pod_resource"

    def __init__(self, reader: CgroupStatReader, *, containers: bool = True) -> None:
        self.reader = reader
        self.containers = containers
        self._prev: dict[str, tuple[float, int]] = {}
        self._usage = reader.usage

    def _one(self, ctx: CycleContext, names: tuple[str, str, str], rel: str, labels: Labels, seen: dict[str, tuple[float, int]]) -> tuple[float | None, float | None]:
        append = ctx.samples.append  # ctx.emit, inlined: this runs for every pod and container each cycle
        cores: float | None = None
        usage, without, with_cache = self._usage(rel)
        if usage >= 0:
            mono = ctx.mono
            seen[rel] = (mono, usage)
            prev = self._prev.get(rel)
            if prev is not None and mono > prev[0] and usage >= prev[1]:
                cores = (usage - prev[1]) / ((mono - prev[0]) * 1e9)
                append(((names[0], labels), cores))
        if without < 0:
            if usage < 0:
                ctx.missing += 1
            return cores, None
        append(((names[1], labels), float(without)))
        append(((names[2], labels), float(with_cache)))
        return cores, float(without)

    def collect(self, ctx: CycleContext) -> None:
        seen: dict[str, tuple[float, int]] = {}
        total_cpu = 0.0
        total_mem = 0.0
        pod_cpu: dict[str, float] = {}
        one = self._one
        pod_names, container_names = _NAMES["pod"], _NAMES["container"]
        for pod in paced(ctx.targets.pods):  # the hot gate: step aside between pods
            try:
                cores, mem = one(ctx, pod_names, pod.rel_dir, pod.labels, seen)
                if cores is not None:
                    total_cpu += cores
                    pod_cpu[pod.uid] = cores
                if mem is not None:
                    total_mem += mem
                if self.containers:
                    for c in pod.containers:
                        one(ctx, container_names, c.rel_dir, c.labels, seen)
            except SystemFileError as exc:
                ctx.note_error(f"pod {pod.namespace}/{pod.name}: {exc}")
        self._prev = seen
        shared = ctx.shared
        # Before every pod has two readings the sum would undercount: leave it unknown instead.
        shared.pods_cpu = total_cpu if (pod_cpu or not ctx.targets.pods) else None
        shared.pods_memory = total_mem
        shared.pod_cpu = pod_cpu
        shared.pods_at = ctx.now
