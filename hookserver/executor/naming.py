"""Cgroup naming, as the executor uses it. The code lives in `hookserver.system.cgroupnames` (shared with the
collectors, which must not import the executor); this module keeps the `hookserver.executor.naming` name."""

from __future__ import annotations

from hookserver.system.cgroupnames import (
    CgroupDriver,
    ContainerRuntime,
    KubeQoS,
    container_dir_name,
    expand_slice,
    normalize_cgroup_dir,
    pod_dir,
    qos_dir,
    sandbox_dir_name,
    strip_runtime_prefix,
)

__all__ = [
    "CgroupDriver",
    "ContainerRuntime",
    "KubeQoS",
    "container_dir_name",
    "expand_slice",
    "normalize_cgroup_dir",
    "pod_dir",
    "qos_dir",
    "sandbox_dir_name",
    "strip_runtime_prefix",
]
