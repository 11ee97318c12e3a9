"""Where the host's /proc, /sys and cgroup trees are. Every file path in hookserver starts here.

Tests point these at fixture trees under tmp_path; the DaemonSet points them at host mounts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["SystemRoots"]


@dataclass(frozen=True, slots=True)
class SystemRoots:
    proc: str = "/proc"
    sys: str = "/sys"
    cgroup: str = "/sys/fs/cgroup"
    # Where nvml / device files live is not configurable: pynvml talks to the driver.

    def proc_path(self, *parts: str) -> str:
        return os.path.join(self.proc, *parts)

    def sys_path(self, *parts: str) -> str:
        return os.path.join(self.sys, *parts)

    def cgroup_path(self, *parts: str) -> str:
        """Join under the cgroup root. No validation here: the executor's resolver checks escapes."""
        return os.path.join(self.cgroup, *(p.lstrip("/") for p in parts))
