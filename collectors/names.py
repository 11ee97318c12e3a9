"""The metric catalogue: every series name the collectors write, its unit, its Prometheus name and, where
koordlet has one, the koordlet metric it stands for. One table, so the store, the exporter, `hookctl top`
and `hookctl metrics` agree on names.

Store labels are short (`pod` = pod UID, `container` = container ID, `qos`, `priority` = priority class,
`device`, `resource`, `degree`, `window`, `app`, `numa`); the exporter renames them to koordlet's label
names (`pod_uid`, `container_id`, `priority_class`, `psi_resource_type`, ...) and adds pod and container
names from the store snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["METRICS", "PROM_LABEL", "MetricSpec", "spec"]


@dataclass(frozen=True, slots=True)
class MetricSpec:
    name: str
    unit: str
    prom: str
    help: str
    koordlet: str = ""
    label_renames: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


# Store label -> Prometheus label, unless a spec renames it.
PROM_LABEL: Mapping[str, str] = MappingProxyType(
    {"pod": "pod_uid", "container": "container_id", "priority": "priority_class", "numa": "numa_node"}
)
_PSI = MappingProxyType({"resource": "psi_resource_type", "degree": "psi_degree", "window": "psi_precision"})


def _m(name: str, unit: str, prom: str, help_: str, koordlet: str = "", renames: Mapping[str, str] | None = None) -> MetricSpec:
    return MetricSpec(name, unit, prom, help_, koordlet, MappingProxyType(dict(renames or {})))


_ALL = (
    # node_resource
    _m("node_cpu_usage", "cores", "hookserver_node_used_cpu_cores",
       "CPU cores used by the node, from /proc/stat deltas.", "koordlet_node_used_cpu_cores"),
    _m("node_memory_usage", "bytes", "hookserver_node_used_memory_bytes",
       "Node memory used without page cache: MemTotal - MemAvailable.", "koordlet_node_used_memory_bytes"),
    _m("node_memory_usage_with_cache", "bytes", "hookserver_node_used_memory_with_page_cache_bytes",
       "Node memory used with page cache: MemTotal - MemFree."),
    _m("node_memory_total", "bytes", "hookserver_node_memory_total_bytes", "Node MemTotal."),
    # pod_resource
    _m("pod_cpu_usage", "cores", "hookserver_pod_used_cpu_cores", "CPU cores used by the pod cgroup."),
    _m("pod_memory_usage", "bytes", "hookserver_pod_used_memory_bytes",
       "Pod memory without page cache: anon + unevictable from memory.stat."),
    _m("pod_memory_usage_with_cache", "bytes", "hookserver_pod_used_memory_with_page_cache_bytes",
       "Pod memory with page cache (v1: + file LRU pages; v2: memory.current)."),
    _m("container_cpu_usage", "cores", "hookserver_container_used_cpu_cores", "CPU cores used by the container cgroup."),
    _m("container_memory_usage", "bytes", "hookserver_container_used_memory_bytes",
       "Container memory without page cache."),
    _m("container_memory_usage_with_cache", "bytes", "hookserver_container_used_memory_with_page_cache_bytes",
       "Container memory with page cache."),
    # pod_throttled
    _m("pod_cpu_throttled_ratio", "ratio", "hookserver_pod_cpu_throttled_ratio",
       "Share of CFS periods the pod was throttled in since the last sample (delta nr_throttled / nr_periods)."),
    _m("container_cpu_throttled_ratio", "ratio", "hookserver_container_cpu_throttled_ratio",
       "Share of CFS periods the container was throttled in since the last sample."),
    # host_application
    _m("host_app_cpu_usage", "cores", "hookserver_host_application_used_cpu_cores",
       "CPU cores used by a host application named in NodeSLO.", "koordlet_host_application_resource_usage{resource=cpu}"),
    _m("host_app_memory_usage", "bytes", "hookserver_host_application_used_memory_bytes",
       "Memory (without page cache) used by a host application named in NodeSLO.",
       "koordlet_host_application_resource_usage{resource=memory}"),
    # system_resource
    _m("system_cpu_usage", "cores", "hookserver_system_used_cpu_cores",
       "Node CPU not used by pods or host applications (never negative).", "koordlet_node_metric_system_usage{resource=cpu}"),
    _m("system_memory_usage", "bytes", "hookserver_system_used_memory_bytes",
       "Node memory not used by pods or host applications (never negative).",
       "koordlet_node_metric_system_usage{resource=memory}"),
    # numa_resource (NodeMetric numaUsages, koordinator #3138)
    _m("numa_cpu_usage", "cores", "hookserver_node_numa_used_cpu_cores",
       "CPU cores used on a NUMA node: per-CPU /proc/stat deltas of its CPUs.",
       "koordlet_node_metric_numa_node_usage{resource=cpu}"),
    _m("numa_memory_usage", "bytes", "hookserver_node_numa_used_memory_bytes",
       "Memory used on a NUMA node: MemTotal - (MemFree + Active(file) + Inactive(file) + SReclaimable).",
       "koordlet_node_metric_numa_node_usage{resource=memory}"),
    _m("numa_system_cpu_usage", "cores", "hookserver_system_numa_used_cpu_cores",
       "System CPU apportioned to a NUMA node by its share of the NUMA CPU usage.",
       "koordlet_node_metric_numa_system_usage{resource=cpu}"),
    _m("numa_system_memory_usage", "bytes", "hookserver_system_numa_used_memory_bytes",
       "NUMA node memory not used by pods (memory.numa_stat), never negative.",
       "koordlet_node_metric_numa_system_usage{resource=memory}"),
    # be_resource
    _m("be_cpu_usage", "cores", "hookserver_be_used_cpu_cores", "CPU cores used by best-effort pods.",
       "koordlet_be_suppress_be_used_cpu_cores"),
    _m("be_cpu_request", "cores", "hookserver_be_requested_cpu_cores", "Sum of best-effort pods' batch-cpu requests."),
    _m("be_cpu_real_limit", "cores", "hookserver_be_real_limit_cpu_cores",
       "What best-effort pods may use now: min(BE cgroup quota, BE cpuset size)."),
    # psi
    _m("node_psi", "percent", "hookserver_node_psi_percent", "Node pressure stall information (/proc/pressure).",
       "", _PSI),
    _m("pod_psi", "percent", "hookserver_pod_psi_percent", "Pod cgroup pressure stall information (cgroup v2).",
       "koordlet_pod_psi", _PSI),
    _m("container_psi", "percent", "hookserver_container_psi_percent",
       "Container cgroup pressure stall information (cgroup v2).", "koordlet_container_psi", _PSI),
    # page_cache
    _m("node_page_cache", "bytes", "hookserver_node_page_cache_bytes", "Node page cache: Buffers + Cached."),
    _m("pod_page_cache", "bytes", "hookserver_pod_page_cache_bytes", "Page cache charged to the pod cgroup."),
    # node_info
    _m("node_cpus", "count", "hookserver_node_cpus", "Logical CPUs the node has."),
    _m("node_cpu_cores", "count", "hookserver_node_cpu_cores", "Physical cores the node has."),
    _m("node_cpu_sockets", "count", "hookserver_node_cpu_sockets", "CPU sockets the node has."),
    _m("numa_memory_total", "bytes", "hookserver_node_numa_memory_total_bytes", "MemTotal of a NUMA node."),
    _m("numa_memory_used", "bytes", "hookserver_node_numa_memory_used_bytes", "MemTotal - MemFree of a NUMA node."),
    # gpu: `device` = UUID, `minor` = the /dev/nvidiaN number (koordlet's gpu_device_uuid and gpu_minor).
    _m("gpu_utilization", "percent", "hookserver_gpu_utilization_percent",
       "GPU utilisation of a device, NVML's own rate (every process, in a pod or not)."),
    _m("gpu_memory_used", "bytes", "hookserver_gpu_memory_used_bytes",
       "GPU memory used on a device, NVML's own figure (every process and the driver's share)."),
    _m("node_gpu_memory_total", "bytes", "hookserver_gpu_memory_total_bytes", "GPU memory of a device (NVML).",
       "node_gpu_memory_total"),
    _m("node_gpu_core_usage", "percent", "hookserver_node_gpu_core_usage_percent",
       "SM utilisation of a device's compute processes, summed (koordlet's node GPU core usage).",
       "node_gpu_core_usage"),
    _m("node_gpu_memory_usage", "bytes", "hookserver_node_gpu_memory_usage_bytes",
       "GPU memory of a device's compute processes, summed (koordlet's node GPU memory usage).",
       "node_gpu_memory_usage"),
    _m("pod_gpu_core_usage", "percent", "hookserver_pod_gpu_core_usage_percent",
       "SM utilisation of a pod's processes on a device.", "pod_gpu_core_usage"),
    _m("pod_gpu_memory_usage", "bytes", "hookserver_pod_gpu_memory_usage_bytes",
       "GPU memory of a pod's processes on a device.", "pod_gpu_memory_usage"),
    _m("container_gpu_core_usage", "percent", "hookserver_container_gpu_core_usage_percent",
       "SM utilisation of a container's processes on a device.", "container_gpu_core_usage"),
    _m("container_gpu_memory_usage", "bytes", "hookserver_container_gpu_memory_usage_bytes",
       "GPU memory of a container's processes on a device.", "container_gpu_memory_usage"),
    # hami_vgpu: HAMi-core's own accounting from its shared cache files (HamiCoreVGPUMonitor); koordlet reads
    # none (HAMi's vGPU monitor does: hami_vgpu_memory_used_bytes, ...). Labels as the gpu series.
    _m("container_vgpu_memory_usage", "bytes", "hookserver_container_vgpu_memory_usage_bytes",
       "GPU memory a container's HAMi-core processes allocated on a device (HAMi's hami_vgpu_memory_used_bytes)."),
    _m("container_vgpu_core_usage", "percent", "hookserver_container_vgpu_core_usage_percent",
       "SM utilisation of a container's HAMi-core processes on a device "
       "(HAMi's hami_container_device_utilization_ratio)."),
    _m("container_vgpu_memory_limit", "bytes", "hookserver_container_vgpu_memory_limit_bytes",
       "GPU memory limit HAMi-core enforces for a container on a device (CUDA_DEVICE_MEMORY_LIMIT)."),
    _m("container_vgpu_core_limit", "percent", "hookserver_container_vgpu_core_limit_percent",
       "SM limit HAMi-core enforces for a container on a device (CUDA_DEVICE_SM_LIMIT); absent when unlimited."),
    _m("pod_vgpu_memory_usage", "bytes", "hookserver_pod_vgpu_memory_usage_bytes",
       "GPU memory a pod's HAMi-core processes allocated on a device (its containers' sum)."),
    _m("pod_vgpu_core_usage", "percent", "hookserver_pod_vgpu_core_usage_percent",
       "SM utilisation of a pod's HAMi-core processes on a device (its containers' sum)."),
)

METRICS: Mapping[str, MetricSpec] = MappingProxyType({m.name: m for m in _ALL})


def spec(name: str) -> MetricSpec:
    """The spec of a store metric; KeyError names the known ones."""
    try:
        return METRICS[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r} (known: {', '.join(sorted(METRICS))})") from None
