"""Which cgroup tree this node has (v1, v2 or hybrid), how the kubelet names its directories, and where each
controller's hierarchy lives. The one place that asks "v1 or v2? systemd or cgroupfs?" (runc's
`manager/new.go` idea): everything downstream takes a `CgroupLayout` and never branches on the host again.
"""

from __future__ import annotations

import enum
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.executor.settings import CgroupSettings
from hookserver.errors import ConfigError
from hookserver.system.cgroupnames import (
    CgroupDriver,
    ContainerRuntime,
    KubeQoS,
    container_dir_name,
    normalize_cgroup_dir,
    pod_dir,
    qos_dir,
    sandbox_dir_name,
)
from hookserver.system.files import exists, is_dir
from hookserver.system.mounts import V1_CONTROLLERS, read_cgroup_mounts
from hookserver.system.roots import SystemRoots

__all__ = ["CgroupLayout", "CgroupVersion"]

logger = logging.getLogger(__name__)

_EMPTY: Mapping[str, str] = MappingProxyType({})


class CgroupVersion(enum.Enum):
    V1 = "v1"
    V2 = "v2"
    # v1 controllers at <root>/<subsystem> plus a controller-less cgroup2 at <root>/unified.
    HYBRID = "hybrid"


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True, slots=True)
class CgroupLayout:
    """The host's cgroup layout. Strings are accepted for the enums so the lead can build one from settings.

    `cgroup_root` defaults to `roots.cgroup`. `hierarchies` maps a v1 controller to its mount (default
    `<root>/<controller>`); `unified` is the cgroup2 mount (default `<root>` on v2, `<root>/unified` on hybrid).
    """

    version: CgroupVersion
    driver: CgroupDriver
    runtime: ContainerRuntime = ContainerRuntime.CONTAINERD
    roots: SystemRoots = field(default_factory=SystemRoots)
    cgroup_root: str = ""
    hierarchies: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    unified: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "version", CgroupVersion(self.version))
        object.__setattr__(self, "driver", CgroupDriver(self.driver))
        object.__setattr__(self, "runtime", ContainerRuntime(self.runtime))
        root = os.path.abspath(self.cgroup_root or self.roots.cgroup)
        object.__setattr__(self, "cgroup_root", root)
        object.__setattr__(self, "hierarchies", MappingProxyType(dict(self.hierarchies)))
        if not self.unified and self.version is not CgroupVersion.V1:
            unified = root if self.version is CgroupVersion.V2 else os.path.join(root, "unified")
            object.__setattr__(self, "unified", unified)

    # -- detection -------------------------------------------------------------------------------
    @classmethod
    def detect(cls, settings: CgroupSettings, roots: SystemRoots) -> CgroupLayout:
        """Build the layout from settings overrides and what the host (or fixture tree) shows.

        The cgroup root is `settings.root`. Mounts under it (from `roots.proc`/self/mounts) win; a root
        that no mount covers (a fixture tree) is read by its files: `cgroup.controllers` at the root means
        v2, `cpu/` or `memory/` sub-directories mean v1, plus `unified/cgroup.controllers` means hybrid.
        """
        root = os.path.abspath(settings.root)
        hierarchies: dict[str, str] = {}
        unified = ""
        for mount in read_cgroup_mounts(roots):
            if not _under(mount.mountpoint, root):
                continue
            if mount.version == 2:
                unified = unified or mount.mountpoint
            for controller in mount.controllers:
                hierarchies.setdefault(controller, mount.mountpoint)
        if not hierarchies and not unified:
            unified, hierarchies = _detect_by_files(root)
        version = _pick_version(settings.version, hierarchies, unified, root)
        if version is CgroupVersion.V2 and not unified:
            unified = root
        layout_for_driver = cls(
            version=version, driver=CgroupDriver.SYSTEMD, runtime=ContainerRuntime(settings.runtime),
            roots=roots, cgroup_root=root, hierarchies=hierarchies, unified=unified,
        )
        driver = _pick_driver(settings.driver, layout_for_driver.hierarchy_root("cpu"))
        layout = cls(
            version=version, driver=driver, runtime=ContainerRuntime(settings.runtime),
            roots=roots, cgroup_root=root, hierarchies=hierarchies, unified=unified,
        )
        logger.info("cgroup layout: %s", layout.describe())
        return layout

    # -- where files go --------------------------------------------------------------------------
    @property
    def writes_v2(self) -> bool:
        """Whether knobs are written with v2 file names. Hybrid writes v1: the kubelet's cgroups live there."""
        return self.version is CgroupVersion.V2

    def hierarchy_root(self, subsystem: str) -> str:
        """The absolute directory that `subsystem`'s relative cgroup dirs hang from."""
        if self.writes_v2:
            return self.unified or self.cgroup_root
        return self.hierarchies.get(subsystem) or os.path.join(self.cgroup_root, subsystem)

    # -- kubelet naming --------------------------------------------------------------------------
    def qos_dir(self, kube_qos: KubeQoS | str) -> str:
        return qos_dir(self.driver, KubeQoS(kube_qos))

    def pod_dir(self, kube_qos: KubeQoS | str, pod_uid: str) -> str:
        """The pod's relative dir from kube QoS ("guaranteed" | "burstable" | "besteffort") and UID."""
        return pod_dir(self.driver, KubeQoS(kube_qos), pod_uid)

    def container_dir(self, pod_cgroup_parent: str, container_id: str) -> str:
        """The container's relative dir under a CRI cgroup parent (expanded path or bare systemd slice)."""
        parent = normalize_cgroup_dir(pod_cgroup_parent)
        name = container_dir_name(self.driver, self.runtime, container_id)
        return f"{parent}/{name}" if parent else name

    def sandbox_dir(self, pod_cgroup_parent: str, sandbox_id: str) -> str:
        parent = normalize_cgroup_dir(pod_cgroup_parent)
        name = sandbox_dir_name(self.driver, self.runtime, sandbox_id)
        return f"{parent}/{name}" if parent else name

    def describe(self) -> dict[str, object]:
        """For `hookctl status`: what was detected and where each hierarchy is."""
        return {
            "version": self.version.value,
            "driver": self.driver.value,
            "runtime": self.runtime.value,
            "cgroup_root": self.cgroup_root,
            "writes": "v2" if self.writes_v2 else "v1",
            "unified": self.unified,
            "hierarchies": dict(sorted(self.hierarchies.items())),
            "roots": {"proc": self.roots.proc, "sys": self.roots.sys, "cgroup": self.roots.cgroup},
        }


def _detect_by_files(root: str) -> tuple[str, dict[str, str]]:
    if exists(os.path.join(root, "cgroup.controllers")):
        return root, {}
    hierarchies = {c: os.path.join(root, c) for c in sorted(V1_CONTROLLERS) if is_dir(os.path.join(root, c))}
    unified = os.path.join(root, "unified")
    has_unified = exists(os.path.join(unified, "cgroup.controllers"))
    return (unified if has_unified else ""), hierarchies


def _pick_version(setting: str, hierarchies: Mapping[str, str], unified: str, root: str) -> CgroupVersion:
    if setting == "v1":
        return CgroupVersion.V1
    if setting == "v2":
        return CgroupVersion.V2
    has_v1 = "cpu" in hierarchies or "memory" in hierarchies
    if has_v1 and unified:
        return CgroupVersion.HYBRID
    if has_v1:
        return CgroupVersion.V1
    if unified:
        return CgroupVersion.V2
    raise ConfigError(
        f"cgroup.root {root!r}: no cgroup v1 cpu/memory controllers and no cgroup2 tree found "
        "(set cgroup.version to force one)"
    )


def _pick_driver(setting: str, cpu_root: str) -> CgroupDriver:
    if setting != "auto":
        return CgroupDriver(setting)
    if is_dir(os.path.join(cpu_root, "kubepods.slice")):
        return CgroupDriver.SYSTEMD
    if is_dir(os.path.join(cpu_root, "kubepods")):
        return CgroupDriver.CGROUPFS
    return CgroupDriver.SYSTEMD
