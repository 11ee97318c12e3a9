"""gpu: NVIDIA device inventory with health, per-device utilisation and memory, and per-process use mapped to pods.

The inventory is re-read every cycle (count, and per device a handle, its UUID and one liveness query; what a
device is is read once per UUID), so an XID, a device that stops answering or one that disappears reaches
`ctx.statics[GPU_DEVICES_KEY]` within one collector interval. A device that disappears is dropped and
reported (a read error naming it, and a warning). koordlet's series (metriccache `node_gpu_core_usage`,
`pod_gpu_memory_usage`, ...: the sum of the device's processes' SM use and memory, labelled with the
device's minor and UUID) are emitted under the same names; `gpu_utilization` and `gpu_memory_used` are
NVML's own device-wide figures, which also count processes that belong to no pod.

A GPU process is mapped to a pod and container by its cgroup membership (`/proc/<pid>/cgroup`): the
longest known pod or container directory that prefixes one of its cgroup paths wins. koordlet does the same
through its pid lists. With no NVML library, no driver or no device, `probe()` returns the reason and the
scheduler lists the collector as disabled: that is the normal state of a CPU node, not an error.
"""

from __future__ import annotations

import logging

from hookserver.gpu_inventory import GPU_DEVICES_STATIC, GPU_DRIVER_VERSION_STATIC
from hookserver.store.timeseries import Labels, make_labels
from hookserver.system.procfs import read_pid_cgroup
from hookserver.system.roots import SystemRoots

from collectors.base import BaseCollector, CycleContext
from collectors.nvml import GpuDevice, NvmlApi, NvmlCallError, NvmlUnavailable
from collectors.targets import Targets

__all__ = ["GPU_DEVICES_KEY", "GPU_DRIVER_VERSION_KEY", "GpuCollector", "owner_of"]

log = logging.getLogger(__name__)

GPU_DEVICES_KEY = GPU_DEVICES_STATIC
# The driver's version string (`550.54.15`): koordlet's `node.koordinator.sh/gpu-driver-version` label.
GPU_DRIVER_VERSION_KEY = GPU_DRIVER_VERSION_STATIC


def _with(labels: Labels, **extra: str) -> Labels:
    return tuple(sorted((*labels, *make_labels(**extra))))


def owner_of(paths: list[str], targets: Targets) -> tuple[Labels, Labels | None] | None:
    """(pod labels, container labels or None) of the pod whose cgroup holds one of `paths`, or None."""
    best: tuple[int, Labels, Labels | None] | None = None
    for pod in targets.pods:
        candidates: list[tuple[str, Labels | None]] = [(c.rel_dir, c.labels) for c in pod.containers]
        candidates.append((pod.rel_dir, None))
        for rel, clabels in candidates:
            prefix = "/" + rel.strip("/")
            for path in paths:
                if (path == prefix or path.startswith(prefix + "/")) and (best is None or len(prefix) > best[0]):
                    best = (len(prefix), pod.labels, clabels)
    return None if best is None else (best[1], best[2])


class GpuCollector(BaseCollector):
    name = "gpu"

    def __init__(self, roots: SystemRoots, nvml: NvmlApi) -> None:
        self.roots = roots
        self.nvml = nvml
        self.devices: list[GpuDevice] = []
        self.driver_version = ""
        self._ready = False

    def probe(self) -> str:
        try:
            self.nvml.init()
        except NvmlUnavailable as exc:
            return f"NVML unavailable: {exc}"
        self._ready = True
        try:
            self.devices = self.nvml.devices()
        except (NvmlCallError, NvmlUnavailable) as exc:
            return f"NVML device inventory failed: {exc}"
        if not self.devices:
            return "no NVIDIA GPU found by NVML"
        try:
            self.driver_version = self.nvml.driver_version()
        except (NvmlCallError, NvmlUnavailable) as exc:
            log.warning("NVML driver version: %s", exc)  # only the label is missing
        return ""

    def close(self) -> None:
        if self._ready:
            self._ready = False
            try:
                self.nvml.shutdown()
            except (NvmlCallError, NvmlUnavailable) as exc:
                log.info("NVML shutdown: %s", exc)

    def _refresh(self, ctx: CycleContext) -> None:
        """Re-read the inventory; on failure keep the last one (and count the error)."""
        try:
            fresh = self.nvml.devices()
        except (NvmlCallError, NvmlUnavailable) as exc:
            ctx.note_error(f"GPU inventory: {exc}")
            return
        now = {d.uuid: d for d in fresh}
        for old in self.devices:
            new = now.get(old.uuid)
            if new is None:
                log.warning("GPU %s (minor %s, %s) disappeared from NVML", old.uuid, old.minor, old.bus_id)
                ctx.note_error(f"GPU {old.uuid} (minor {old.minor}) disappeared")
            elif old.healthy and not new.healthy:
                log.warning("GPU %s (minor %s) unhealthy: %s", new.uuid, new.minor, new.unhealthy_reason)
        self.devices = fresh

    def collect(self, ctx: CycleContext) -> None:
        self._refresh(ctx)
        ctx.statics[GPU_DEVICES_KEY] = tuple(self.devices)
        if self.driver_version:
            ctx.statics[GPU_DRIVER_VERSION_KEY] = self.driver_version
        cgroups: dict[int, tuple[Labels, Labels | None] | None] = {}
        for dev in self.devices:
            if dev.unhealthy_code == "DeviceLost":
                continue  # it does not answer: every query would fail; the inventory says why
            ids = {"device": dev.uuid, "minor": str(dev.minor)}
            dlabels = _with(ctx.node_labels, **ids)
            try:
                gpu_pct, _mem_pct = self.nvml.utilization(dev.index)
                used = self.nvml.memory_used(dev.index)
                procs = self.nvml.processes(dev.index)
                sm = self.nvml.process_utilization(dev.index)
            except NvmlCallError as exc:
                ctx.note_error(f"GPU {dev.index} ({dev.uuid}): {exc}")
                continue
            ctx.emit("gpu_utilization", dlabels, gpu_pct)
            ctx.emit("gpu_memory_used", dlabels, float(used))
            ctx.emit("node_gpu_memory_total", dlabels, float(dev.memory_total_bytes))
            # koordlet's node figures: the sum over the device's processes (those with an SM sample).
            ctx.emit("node_gpu_core_usage", dlabels, sum(sm.get(p.pid, 0.0) for p in procs))
            ctx.emit("node_gpu_memory_usage", dlabels, float(sum(p.used_memory_bytes for p in procs)))
            pods: dict[Labels, list[float]] = {}
            containers: dict[Labels, list[float]] = {}
            for proc in procs:
                if proc.pid not in cgroups:
                    paths = [path for _controllers, path in read_pid_cgroup(self.roots, proc.pid)]
                    cgroups[proc.pid] = owner_of(paths, ctx.targets) if paths else None
                owner = cgroups[proc.pid]
                if owner is None:
                    continue
                pod_labels, container_labels = owner
                for table, labels in ((pods, pod_labels), (containers, container_labels)):
                    if labels is None:
                        continue
                    acc = table.setdefault(labels, [0.0, 0.0])
                    acc[0] += sm.get(proc.pid, 0.0)
                    acc[1] += proc.used_memory_bytes
            for level, table in (("pod", pods), ("container", containers)):
                for labels, (util, mem) in table.items():
                    key_labels = _with(labels, **ids)
                    ctx.emit(f"{level}_gpu_core_usage", key_labels, util)
                    ctx.emit(f"{level}_gpu_memory_usage", key_labels, mem)
