"""What the hook plugins are told about the node at start: here, which CPU-priority files its kernel has.

The GroupIdentity hook (`hookserver.hooks.plugins.group_identity`) is pure and reads no file, so whether the
kernel has `cpu.bvt_warp_ns` (Anolis) or `cpu.idle` (mainline 5.15+, v1 and v2) is probed once here, at the
kubelet's top QoS cgroup, where the QoS snapshot's kernel reader probes the same optional files
(`qos.snapshot.kernel_reader.OPTIONAL_CGROUP_FILES`). The daemon passes the result to `default_plugins`.
"""

from __future__ import annotations

import os

from hookserver.executor.layout import CgroupLayout
from hookserver.hooks.plugins import CPU_PRIORITY_FILES
from hookserver.system.cgroupnames import KubeQoS
from hookserver.system.files import exists
from qos.settings import QoSSettings

__all__ = ["cpu_priority_files", "group_identity_files"]


def cpu_priority_files(layout: CgroupLayout) -> frozenset[str]:
    """The CPU-priority files present at the kubelet's top QoS cgroup (the pods' parent), by name. Empty when
    that cgroup is missing (no kubelet yet): the hook is then not registered and the reconciler covers new pods."""
    base = os.path.join(layout.hierarchy_root("cpu"), layout.qos_dir(KubeQoS.GUARANTEED))
    return frozenset(name for name in CPU_PRIORITY_FILES if exists(os.path.join(base, name)))


def group_identity_files(qos: QoSSettings, layout: CgroupLayout) -> frozenset[str]:
    """`cpu_priority_files`, or none while the GroupIdentity reconciler would write nothing (QoS off, a dry run
    for every reconciler or for GroupIdentity): the hook is then not registered, so it never writes what its
    reconciler only plans. Its feature gate is the reconciler's too (`default_plugins`)."""
    own = qos.reconcilers.get("GroupIdentity")
    if not qos.enabled or qos.dry_run or (own is not None and own.dry_run):
        return frozenset()
    return cpu_priority_files(layout)
