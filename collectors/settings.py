"""Collector settings: one enabled flag and interval per collector, with koordlet's defaults.

koordlet (reference koordinator-runtimehooks.md §7): resource usage every 1 s, PSI every 10 s, node CPU info
every 60 s, page cache collector off, metric expiry 1800 s, GC every 300 s. GPU is on and turns itself off,
with a reason, where NVML or a device is missing.
"""

from __future__ import annotations

from typing import Literal

import posixpath

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["COLLECTOR_NAMES", "CollectorSettings", "CollectorToggle"]

# Every collector by name, in the order one cycle runs them (later ones read what earlier ones measured).
COLLECTOR_NAMES = (
    "node_info",
    "node_resource",
    "pod_resource",
    "host_application",
    "pod_throttled",
    "be_resource",
    "system_resource",
    "numa_resource",
    "page_cache",
    "psi",
    "gpu",
    "hami_vgpu",
)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CollectorToggle(_Frozen):
    enabled: bool = True
    interval_s: float = Field(default=1.0, gt=0, le=3600)


class CollectorSettings(_Frozen):
    node_resource: CollectorToggle = CollectorToggle()
    # Pods and, with `containers`, their containers: CPU and memory with and without page cache.
    pod_resource: CollectorToggle = CollectorToggle()
    containers: bool = True
    pod_throttled: CollectorToggle = CollectorToggle()
    host_application: CollectorToggle = CollectorToggle()
    system_resource: CollectorToggle = CollectorToggle()
    be_resource: CollectorToggle = CollectorToggle()
    # Per-NUMA node and system usage (NodeMetric numaUsages); reads each pod's memory.numa_stat.
    numa_resource: CollectorToggle = CollectorToggle()
    psi: CollectorToggle = CollectorToggle(interval_s=10.0)
    # Which PSI averages to keep per pod/container (the node keeps all three). Each adds 6 series a cgroup.
    psi_cgroup_windows: tuple[Literal["avg10", "avg60", "avg300"], ...] = ("avg10",)
    psi_containers: bool = False
    page_cache: CollectorToggle = CollectorToggle(enabled=False)
    node_info: CollectorToggle = CollectorToggle(interval_s=60.0)
    gpu: CollectorToggle = CollectorToggle()
    # HAMi-core vGPU use from its shared cache files: koordlet's gate HamiCoreVGPUMonitor (alpha, off by default),
    # so off here too; the gate turns it on (`collectors.hami_vgpu.with_hami_vgpu_gate`), and so may this toggle.
    hami_vgpu: CollectorToggle = CollectorToggle(enabled=False)
    # The host directory GPUEnvInject mounts the per-container cache directories from: unless set, the HAMi-core
    # library's directory + `/containers` (koordlet's DaemonSet mounts /usr/local/vgpu/containers).
    hami_vgpu_dir: str = "/usr/local/vgpu/containers"
    # Time series: how long samples are kept (ring size = retention / interval) and the series cap.
    retention_s: float = Field(default=1800.0, gt=0, le=30 * 86400)
    max_series: int = Field(default=200_000, ge=1)
    gc_interval_s: float = Field(default=300.0, gt=0)

    @field_validator("hami_vgpu_dir")
    @classmethod
    def _absolute_dir(cls, value: str) -> str:
        if not value.startswith("/") or "\x00" in value or posixpath.normpath(value) != value.rstrip("/"):
            raise ValueError(f"hami_vgpu_dir {value!r} must be an absolute, normalised path")
        return value.rstrip("/") or "/"

    def toggle(self, name: str) -> CollectorToggle:
        value = getattr(self, name, None)
        if not isinstance(value, CollectorToggle):
            raise KeyError(f"no collector named {name!r} (known: {', '.join(COLLECTOR_NAMES)})")
        return value
