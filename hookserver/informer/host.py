"""The node as the local host describes it, for standalone mode (no Node object to watch).

Name from settings, the well-known labels a kubelet would set (hostname, os, arch) plus any labels the
operator configures for nodeSelector matching, and cpu/memory capacity from /proc through the system
roots. Allocatable equals capacity: without a kubelet we do not know its reservations.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Mapping
from types import MappingProxyType

from hookserver.store.records import NodeRecord
from hookserver.system import SystemRoots, read_kv

__all__ = ["host_node"]

_ARCH = {"x86_64": "amd64", "aarch64": "arm64", "armv7l": "arm", "ppc64le": "ppc64le", "s390x": "s390x"}


def host_node(
    node_name: str, *, roots: SystemRoots, extra_labels: Mapping[str, str] | None = None, now: float = 0.0
) -> NodeRecord:
    labels = {
        "kubernetes.io/hostname": node_name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": _ARCH.get(platform.machine(), platform.machine()),
    }
    labels.update(extra_labels or {})
    capacity: dict[str, str] = {}
    cpus = os.cpu_count()
    if cpus:
        capacity["cpu"] = str(cpus)
    mem_kib = read_kv(roots.proc_path("meminfo")).get("MemTotal")
    if mem_kib:
        capacity["memory"] = f"{mem_kib}Ki"
    frozen = MappingProxyType(capacity)
    return NodeRecord(
        name=node_name, labels=MappingProxyType(labels), capacity=frozen, allocatable=frozen, source="host",
        updated_at=now,
    )
