"""A private subtree of the host's REAL cgroup v1 hierarchies for hook tests, always removed.

`v1_subtree(subsystems)` makes `/sys/fs/cgroup/<sub>/hookserver-hooks-<random>` in each named hierarchy and
yields its path relative to the hierarchy roots ("/hookserver-hooks-…"), for a pod's cgroup parent or a host
application's cgroup path. A cpuset child starts with no CPUs on v1 (unless the parent sets
`cgroup.clone_children`), which would make every cpuset write below it fail, so `mkdirs` copies the parent's
`cpuset.cpus`/`cpuset.mems` into each directory it makes. `unusable()` says why a host cannot run these tests;
`cpuset_host()` skips a test that needs them and two online CPUs (a bound pod beside a share pool).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.topology import CpuInfo

__all__ = ["ROOT", "cpuset_host", "mkdirs", "unusable", "v1_subtree"]

ROOT = Path("/sys/fs/cgroup")


def unusable(subsystems: tuple[str, ...]) -> str:
    if os.geteuid() != 0:
        return "needs root to create cgroups"
    for sub in subsystems:
        if not (ROOT / sub / "cgroup.procs").is_file():
            return f"no cgroup v1 {sub} hierarchy at {ROOT / sub}"
    return ""


def cpuset_host(subsystems: tuple[str, ...]) -> tuple[list[int], tuple[CpuInfo, ...]]:
    """The host's online CPUs, sorted, and as one socket's topology; skips the test where `subsystems` are
    unusable or fewer than two CPUs are online."""
    reason = unusable(subsystems)
    if reason:
        pytest.skip(reason)
    online = sorted(parse_cpu_list((ROOT / "cpuset" / "cpuset.cpus").read_text()))
    if len(online) < 2:
        pytest.skip("needs two CPUs for a bound pod beside a share pool")
    return online, tuple(CpuInfo(cpu=i, core=i, socket=0, numa_node=0, l3=0, online=True) for i in online)


def mkdirs(subsystem: str, rel: str) -> Path:
    """Make `rel` (and its missing parents) under one hierarchy; cpuset dirs inherit their parent's CPUs/mems."""
    path = ROOT / subsystem
    for part in [p for p in rel.split("/") if p]:
        parent, path = path, path / part
        if not path.is_dir():
            path.mkdir()
            if subsystem == "cpuset":
                for name in ("cpuset.cpus", "cpuset.mems"):
                    (path / name).write_text((parent / name).read_text())
    return path


@contextmanager
def v1_subtree(subsystems: tuple[str, ...]) -> Iterator[str]:
    name = f"hookserver-hooks-{uuid.uuid4().hex[:10]}"
    try:
        for sub in subsystems:
            mkdirs(sub, name)
        yield f"/{name}"
    finally:
        for sub in subsystems:
            top = ROOT / sub / name
            for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda t: -t[0].count("/")):
                os.rmdir(dirpath)
