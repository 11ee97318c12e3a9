"""hami_vgpu: each HAMi-core container's vGPU memory and SM use, from the shared cache files (`HamiCoreVGPUMonitor`).

With the gate on, GPUEnvInject gives every HAMi-core container `CUDA_DEVICE_MEMORY_SHARED_CACHE` and
bind-mounts the host directory `<containers dir>/<pod uid>_<container>` (default `/usr/local/vgpu/containers`,
the directory koordlet's DaemonSet mounts). HAMi-core accounts, per CUDA process, the device memory it
allocated and the SM share NVML gave it, in that file (layout: `hookserver.system.hami_cache`). Every
interval this collector lists the directory, maps each entry's name to a pod the agent knows (the pod UID
before the first `_`, the container name after it), reads the file, and emits per container and device:

* `container_vgpu_memory_usage` (bytes) and `container_vgpu_core_usage` (percent of the device's SMs): the
  sum over the container's live HAMi-core processes, what HAMi's vGPU monitor exports as
  `hami_vgpu_memory_used_bytes` and `hami_container_device_utilization_ratio`;
* `container_vgpu_memory_limit` (bytes) and `container_vgpu_core_limit` (percent; only when HAMi-core limits
  SMs): the limits HAMi-core enforces, i.e. what GPUEnvInject set from the allocation;
* per pod and device, `pod_vgpu_memory_usage` and `pod_vgpu_core_usage`, the containers' sums.

Labels: the container's (pod UID, container ID, QoS, priority) plus `device` = the GPU's UUID and `minor`
when the GPU collector's inventory knows that UUID, the same device labels as the `*_gpu_*` series.

Why names of their own, not koordlet's `container_gpu_*` with a `source` label: koordlet (v1.7, the gate's
origin, koordinator #2578) reads no cache file; its gate only prepares the env and the mount for HAMi's own
vGPU monitor, and its `container_gpu_*` metric-cache kinds are NVML process accounting, which the `gpu`
collector already writes for these same containers. One series has one writer, and a `source` label on
those names would make every reader of them (the NodeMetric report sums `container_gpu_*` per pod) count a
HAMi-core process twice. HAMi-core's figures are what the container sees of its vGPU (memory it allocated
through the library, against its limit), so they are a view of their own, beside NVML's.

Bad files never break a cycle: an entry that is a symlink, a cache file that is a symlink or not a regular
file, truncated, with the wrong magic or version, or corrupt counts as a read error (`hookctl status`) and is
logged at most once per `log_every_s` per entry and reason; a file or directory that vanished while read
counts as missing; an entry of a pod the agent does not know (a pod that is gone: HAMi's monitor removes
those, this read-only collector does not) and a file HAMi-core has not created or set up yet are only
counted (`skip_counts()`).
"""

from __future__ import annotations

import logging
import posixpath
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from hookserver.aio.hotgate import paced
from hookserver.store.timeseries import Labels, make_labels
from hookserver.system.hami_cache import VgpuCacheError, list_entries, read_entry

from collectors.base import BaseCollector, CycleContext
from collectors.gpu import GPU_DEVICES_KEY
from collectors.nvml import GpuDevice
from collectors.settings import CollectorSettings
from collectors.targets import PodTarget, Targets

__all__ = ["ERROR_KINDS", "HamiVgpuCollector", "QUIET_KINDS", "with_hami_vgpu_gate"]

log = logging.getLogger(__name__)

# Reasons a file is skipped. Errors are counted as read errors and logged (rate-limited); quiet ones are the
# normal states of a node (a container without a CUDA process yet, a pod that went away).
ERROR_KINDS = frozenset({
    "symlink", "not_regular", "truncated", "bad_magic", "unsupported_version", "corrupt", "unreadable",
    "bad_name", "bad_device", "ambiguous",
})
QUIET_KINDS = frozenset({"absent", "uninitialised", "unknown_pod", "vanished"})
_LOG_KEYS_MAX = 4096


def with_hami_vgpu_gate(settings: CollectorSettings, *, gate_on: bool, library_path: str) -> CollectorSettings:
    """The collector settings with the gate `HamiCoreVGPUMonitor` folded in, as `hookserver.wiring.devices`
    folds its gates: the gate turns `hami_vgpu` on (without it koordlet's hook gives no container a cache file);
    `collectors.hami_vgpu.enabled: true` alone also turns it on (HAMi's own device plugin lays out the same
    directory). Unless `hami_vgpu_dir` was set explicitly, it is where GPUEnvInject mounts from:
    `<dirname(library_path)>/containers` (`hook.gpu.hami_core_library_path`)."""
    data = settings.model_dump()
    data["hami_vgpu"] = {**data["hami_vgpu"], "enabled": settings.hami_vgpu.enabled or gate_on}
    if "hami_vgpu_dir" not in settings.model_fields_set:
        data["hami_vgpu_dir"] = f"{posixpath.dirname(library_path).rstrip('/')}/containers"
    return CollectorSettings.model_validate(data)


def _with(labels: Labels, extra: Labels) -> Labels:
    return tuple(sorted((*labels, *extra)))


class HamiVgpuCollector(BaseCollector):
    name = "hami_vgpu"

    def __init__(
        self, directory: str, *, inventory: Callable[[str], Any] | None = None, log_every_s: float = 300.0
    ) -> None:
        """`directory`: the host's `<library dir>/containers`. `inventory`: reads a store static (the GPU
        collector's `GPU_DEVICES_KEY`) when the GPU collector did not run in this cycle's group."""
        self.directory = directory
        self._inventory = inventory
        self.log_every_s = log_every_s
        self._skips: Counter[str] = Counter()
        self._logged: dict[tuple[str, str], tuple[float, int]] = {}
        self._index: tuple[Targets, dict[str, PodTarget]] | None = None

    def skip_counts(self) -> dict[str, int]:
        """Files skipped since start, by reason (see `ERROR_KINDS`, `QUIET_KINDS`)."""
        return dict(self._skips)

    def _pods(self, targets: Targets) -> dict[str, PodTarget]:
        index = self._index
        if index is None or index[0] is not targets:  # targets are one object per store version
            index = (targets, {p.uid: p for p in targets.pods})
            self._index = index
        return index[1]

    def _minors(self, ctx: CycleContext) -> Mapping[str, int]:
        devices: Any = ctx.statics.get(GPU_DEVICES_KEY)
        if devices is None and self._inventory is not None:
            devices = self._inventory(GPU_DEVICES_KEY)
        return {d.uuid: d.minor for d in devices or () if isinstance(d, GpuDevice)}

    def _skip(self, ctx: CycleContext, kind: str, entry: str, message: str) -> None:
        """Count a skipped entry; an error is noted in the cycle and logged once per `log_every_s`."""
        self._skips[kind] += 1
        if kind == "vanished":
            ctx.missing += 1
        if kind not in ERROR_KINDS:
            log.debug("vGPU cache %s skipped (%s): %s", entry, kind, message)
            return
        ctx.note_error(f"vGPU cache {entry}: {message}")
        key = (kind, entry)
        last = self._logged.get(key)
        if last is not None and ctx.mono - last[0] < self.log_every_s:
            self._logged[key] = (last[0], last[1] + 1)
            return
        if len(self._logged) >= _LOG_KEYS_MAX:
            self._logged = {k: v for k, v in self._logged.items() if ctx.mono - v[0] < self.log_every_s}
        suppressed = last[1] if last is not None else 0
        self._logged[key] = (ctx.mono, 0)
        log.warning(
            "vGPU cache %s skipped (%s): %s%s", entry, kind, message,
            f" ({suppressed} more since the last report)" if suppressed else "",
        )

    def collect(self, ctx: CycleContext) -> None:
        try:
            entries = list_entries(self.directory)
        except VgpuCacheError as exc:
            self._skip(ctx, exc.kind, self.directory, str(exc))
            return
        if not entries:
            return
        pods = self._pods(ctx.targets)
        minors = self._minors(ctx)
        pod_sums: dict[tuple[Labels, Labels], list[float]] = {}
        for entry in paced(entries, every=16):
            uid, sep, cname = entry.partition("_")
            if not sep or not uid or not cname:
                self._skip(ctx, "bad_name", entry, "not <pod uid>_<container>")
                continue
            pod = pods.get(uid)
            if pod is None:
                self._skip(ctx, "unknown_pod", entry, f"no known pod {uid}")
                continue
            try:
                region = read_entry(self.directory, entry)
            except VgpuCacheError as exc:
                self._skip(ctx, exc.kind, entry, str(exc))
                continue
            for why in region.skipped_devices:
                self._skip(ctx, "bad_device", entry, why)
            container = next((c for c in pod.containers if c.name == cname), None)
            for dev in region.devices:
                minor = minors.get(dev.uuid)
                ids = make_labels(device=dev.uuid, minor="" if minor is None else str(minor))
                if container is not None:
                    labels = _with(container.labels, ids)
                    ctx.emit("container_vgpu_memory_usage", labels, float(dev.memory_used_bytes))
                    ctx.emit("container_vgpu_core_usage", labels, float(dev.sm_util_percent))
                    ctx.emit("container_vgpu_memory_limit", labels, float(dev.memory_limit_bytes))
                    if dev.sm_limit_percent:
                        ctx.emit("container_vgpu_core_limit", labels, float(dev.sm_limit_percent))
                acc = pod_sums.setdefault((pod.labels, ids), [0.0, 0.0])
                acc[0] += dev.memory_used_bytes
                acc[1] += dev.sm_util_percent
        for (pod_labels, ids), (memory, core) in pod_sums.items():
            labels = _with(pod_labels, ids)
            ctx.emit("pod_vgpu_memory_usage", labels, memory)
            ctx.emit("pod_vgpu_core_usage", labels, core)
