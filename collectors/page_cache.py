"""page_cache: node page cache (Buffers + Cached) and the page cache charged to each pod cgroup.

Off by default, as in koordlet: pod_resource already reports memory with and without page cache; this adds
the cache itself, for reclaim decisions that care how much of a pod's memory the kernel could drop.
"""

from __future__ import annotations

from hookserver.errors import SystemFileError
from hookserver.system.cgroupstats import CgroupStatReader
from hookserver.system.procfs import read_meminfo
from hookserver.system.roots import SystemRoots

from collectors.base import BaseCollector, CycleContext

__all__ = ["PageCacheCollector"]


class PageCacheCollector(BaseCollector):
    name = "page_cache"

    def __init__(self, roots: SystemRoots, reader: CgroupStatReader) -> None:
        self.roots = roots
        self.reader = reader

    def collect(self, ctx: CycleContext) -> None:
        mem = read_meminfo(self.roots)
        if mem is None:
            ctx.missing += 1
        else:
            ctx.emit("node_page_cache", ctx.node_labels, float(mem.page_cache))
        for pod in ctx.targets.pods:
            try:
                usage = self.reader.memory(pod.rel_dir)
            except SystemFileError as exc:
                ctx.note_error(f"pod {pod.namespace}/{pod.name}: {exc}")
                continue
            if usage is None:
                ctx.missing += 1
                continue
            ctx.emit("pod_page_cache", pod.labels, float(usage.cache))
