"""psi: pressure stall information for the node (/proc/pressure/{cpu,memory,io}) and, on cgroup v2, per pod
(and, if asked, per container) from `<cgroup>/{cpu,memory,io}.pressure`.

Values are the kernel's running averages in percent (`avg10`, `avg60`, `avg300`), for `some` and `full`
stalls. The node keeps all three windows; cgroups keep the configured ones (avg10 by default), since each
window costs six series per cgroup.
"""

from __future__ import annotations

from collections.abc import Sequence

from hookserver.aio.hotgate import paced
from hookserver.errors import SystemFileError
from hookserver.store.timeseries import Labels
from hookserver.system.cgroupstats import CgroupStatReader, CgroupVersion
from hookserver.system.files import exists
from hookserver.system.procfs import PSI_RESOURCES, PressureLine, read_pressure
from hookserver.system.roots import SystemRoots

from collectors.base import BaseCollector, CycleContext

__all__ = ["PSICollector"]

_ALL_WINDOWS = ("avg10", "avg60", "avg300")


def _emit(ctx: CycleContext, metric: str, base: Labels, resource: str, lines: dict[str, PressureLine], windows: Sequence[str]) -> None:
    for degree, line in lines.items():
        for window in windows:
            labels = tuple(sorted((*base, ("degree", degree), ("resource", resource), ("window", window))))
            ctx.emit(metric, labels, float(getattr(line, window)))


class PSICollector(BaseCollector):
    name = "psi"

    def __init__(
        self, roots: SystemRoots, reader: CgroupStatReader, *, cgroup_windows: Sequence[str] = ("avg10",), containers: bool = False
    ) -> None:
        self.roots = roots
        self.reader = reader
        self.cgroup_windows = tuple(cgroup_windows)
        self.containers = containers

    def probe(self) -> str:
        if not exists(self.roots.proc_path("pressure", "cpu")):
            return f"no {self.roots.proc_path('pressure')}: the kernel has PSI off (CONFIG_PSI=n or psi=0)"
        return ""

    def collect(self, ctx: CycleContext) -> None:
        for resource in PSI_RESOURCES:
            lines = read_pressure(self.roots.proc_path("pressure", resource))
            if lines is None:
                ctx.missing += 1
                continue
            _emit(ctx, "node_psi", ctx.node_labels, resource, lines, _ALL_WINDOWS)
        if self.reader.version is not CgroupVersion.V2:
            return
        for pod in paced(ctx.targets.pods):  # the hot gate: step aside between pods
            try:
                self._cgroup(ctx, "pod_psi", pod.rel_dir, pod.labels)
                if self.containers:
                    for c in pod.containers:
                        self._cgroup(ctx, "container_psi", c.rel_dir, c.labels)
            except SystemFileError as exc:
                ctx.note_error(f"pod {pod.namespace}/{pod.name}: {exc}")

    def _cgroup(self, ctx: CycleContext, metric: str, rel: str, labels: Labels) -> None:
        pressure = self.reader.pressure(rel)
        if pressure is None:
            ctx.missing += 1
            return
        for resource, lines in pressure.items():
            _emit(ctx, metric, labels, resource, lines, self.cgroup_windows)
