"""Executor layer (beside hooks, qos and predictor; above store and system): the only writer of cgroup files.

It takes version- and driver-independent `ResourcePlan`s, resolves every path under the cgroup root
(refusing escapes before writing anything), converts v1 values for v2, skips unchanged values, orders
leveled updates (grow top-down, shrink bottom-up) and audits every write.
"""

from hookserver.executor.executor import CgroupExecutor, build_executor
from hookserver.executor.fileio import CgroupFiles, OsCgroupFiles
from hookserver.executor.layout import CgroupLayout, CgroupVersion
from hookserver.system.cgroupnames import CgroupDriver, ContainerRuntime, KubeQoS
from hookserver.executor.plan import (
    ApplyReport,
    CgroupResource,
    CgroupWrite,
    ResourceExecutor,
    ResourcePlan,
    WriteResult,
    writes_for_resources,
)

__all__ = [
    "ApplyReport",
    "CgroupDriver",
    "CgroupExecutor",
    "CgroupFiles",
    "CgroupLayout",
    "CgroupResource",
    "CgroupVersion",
    "CgroupWrite",
    "ContainerRuntime",
    "KubeQoS",
    "OsCgroupFiles",
    "ResourceExecutor",
    "ResourcePlan",
    "WriteResult",
    "build_executor",
    "writes_for_resources",
]
