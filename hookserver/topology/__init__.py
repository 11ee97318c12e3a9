"""The node's CPU topology as koordinator sees it: the CPUs koord-scheduler handed to LSE/LSR pods, the
share pools everyone else runs in, and the NodeResourceTopology document koordlet publishes.

Layer: beside `hookserver.view`, below the areas. The hooks (CPUSetAllocator), the QoS planners and the
informer's NRT writer all read the same pure functions here, so the pool a container is pinned to, the pool
CPU suppress takes BE CPUs from and the pool koord-scheduler reads back can never disagree. No I/O: the
caller brings the sysfs topology (`hookserver.system.topology`) and the store's pods and node.
"""

from hookserver.topology.annotations import (
    ANNOTATION_CPU_BASIC_INFO,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_BE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_ALLOCS,
    ANNOTATION_NODE_CPU_SHARED_POOLS,
    ANNOTATION_NODE_CPU_TOPOLOGY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_NODE_SYSTEM_QOS_RESOURCE,
    ANNOTATION_RESOURCE_STATUS,
    ResourceStatusError,
    pod_cpuset,
    pod_numa_nodes,
)
from hookserver.topology.pools import CpuPools, SharePool, compute_pools
from hookserver.topology.report import NRT_API_VERSION, NRT_KIND, build_report, canonical, logical_cores

__all__ = [
    "ANNOTATION_CPU_BASIC_INFO",
    "ANNOTATION_KUBELET_CPU_MANAGER_POLICY",
    "ANNOTATION_NODE_BE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_ALLOCS",
    "ANNOTATION_NODE_CPU_SHARED_POOLS",
    "ANNOTATION_NODE_CPU_TOPOLOGY",
    "ANNOTATION_NODE_RESERVATION",
    "ANNOTATION_NODE_SYSTEM_QOS_RESOURCE",
    "ANNOTATION_RESOURCE_STATUS",
    "CpuPools",
    "NRT_API_VERSION",
    "NRT_KIND",
    "ResourceStatusError",
    "SharePool",
    "build_report",
    "canonical",
    "compute_pools",
    "logical_cores",
    "pod_cpuset",
    "pod_numa_nodes",
]
