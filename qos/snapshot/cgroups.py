"""Where the cgroup hierarchies are, for the snapshot's readers: the executor's layout as a plain value.

Its own module because both readers (`builder.py` for the BE tier, `kernel_reader.py` for the CFS and task
files) take it, and the builder constructs the kernel reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hookserver.system.cgroupnames import CgroupDriver, ContainerRuntime

__all__ = ["CgroupView"]


@dataclass(frozen=True, slots=True)
class CgroupView:
    """Where the cgroup hierarchies are, as the executor's layout says (the daemon passes it in):
    `hierarchy_root(subsystem)` is the absolute directory relative cgroup dirs hang from."""

    hierarchy_root: Callable[[str], str]
    v2: bool
    driver: CgroupDriver
    runtime: ContainerRuntime = ContainerRuntime.CONTAINERD
