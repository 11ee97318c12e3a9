"""Names of the collectors' series that other areas read: the predictor, the NodeMetric report and the capacity
publisher (see collectors/names.py; areas may not import collectors, so the names are repeated here, in a shared
helper outside the layers, and a test keeps them in step)."""

from __future__ import annotations

__all__ = [
    "CONTAINER_GPU_CORE",
    "CONTAINER_GPU_MEMORY",
    "NODE_GPU_CORE",
    "NODE_GPU_MEMORY",
    "NODE_GPU_MEMORY_TOTAL",
    "POD_GPU_CORE",
    "POD_GPU_MEMORY",
    "HOST_APP_CPU",
    "HOST_APP_MEMORY",
    "NODE_CPU",
    "NODE_MEMORY",
    "NODE_MEMORY_WITH_CACHE",
    "NUMA_CPU",
    "NUMA_MEMORY",
    "NUMA_SYSTEM_CPU",
    "NUMA_SYSTEM_MEMORY",
    "POD_CPU",
    "POD_MEMORY",
    "POD_MEMORY_WITH_CACHE",
    "SYSTEM_CPU",
    "SYSTEM_MEMORY",
]

NODE_CPU = "node_cpu_usage"
NODE_MEMORY = "node_memory_usage"
NODE_MEMORY_WITH_CACHE = "node_memory_usage_with_cache"
POD_CPU = "pod_cpu_usage"
POD_MEMORY = "pod_memory_usage"
POD_MEMORY_WITH_CACHE = "pod_memory_usage_with_cache"
SYSTEM_CPU = "system_cpu_usage"
SYSTEM_MEMORY = "system_memory_usage"
HOST_APP_CPU = "host_app_cpu_usage"
HOST_APP_MEMORY = "host_app_memory_usage"
NUMA_CPU = "numa_cpu_usage"
NUMA_MEMORY = "numa_memory_usage"
NUMA_SYSTEM_CPU = "numa_system_cpu_usage"
NUMA_SYSTEM_MEMORY = "numa_system_memory_usage"
# GPU, per device (labels `device` = UUID, `minor`): koordlet's metriccache kinds of the same names, which its
# NodeMetric report reads (node, pod and container GPU core and memory use).
NODE_GPU_CORE = "node_gpu_core_usage"
NODE_GPU_MEMORY = "node_gpu_memory_usage"
NODE_GPU_MEMORY_TOTAL = "node_gpu_memory_total"
POD_GPU_CORE = "pod_gpu_core_usage"
POD_GPU_MEMORY = "pod_gpu_memory_usage"
CONTAINER_GPU_CORE = "container_gpu_core_usage"
CONTAINER_GPU_MEMORY = "container_gpu_memory_usage"
