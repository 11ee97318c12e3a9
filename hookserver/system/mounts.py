"""Cgroup mounts from /proc/self/mounts: which v1 controllers and which cgroup2 tree a host has.

Read through `SystemRoots.proc`, so tests can hand in a mounts file for a fixture tree.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = ["V1_CONTROLLERS", "CgroupMount", "parse_mounts", "read_cgroup_mounts"]

logger = logging.getLogger(__name__)

# Controller names that may appear in a v1 cgroup mount's options.
V1_CONTROLLERS = frozenset(
    {
        "blkio", "cpu", "cpuacct", "cpuset", "devices", "freezer", "hugetlb", "memory", "misc",
        "net_cls", "net_prio", "perf_event", "pids", "rdma",
    }
)

_OCTAL = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True, slots=True)
class CgroupMount:
    """One cgroup mount. `controllers` is empty for cgroup2 and for named hierarchies (name=systemd)."""

    mountpoint: str
    version: int  # 1 or 2
    controllers: frozenset[str]


def _unescape(field: str) -> str:
    # /proc/mounts writes space, tab, newline and backslash as \040, \011, \012, \134.
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), field)


def parse_mounts(text: str) -> list[CgroupMount]:
    """The cgroup and cgroup2 entries of a mounts file; other lines (and malformed ones) are skipped."""
    out: list[CgroupMount] = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        fstype = fields[2]
        if fstype == "cgroup2":
            out.append(CgroupMount(_unescape(fields[1]), 2, frozenset()))
        elif fstype == "cgroup":
            options = frozenset(fields[3].split(","))
            out.append(CgroupMount(_unescape(fields[1]), 1, options & V1_CONTROLLERS))
    return out


def read_cgroup_mounts(roots: SystemRoots) -> list[CgroupMount]:
    """Cgroup mounts as the current process sees them; [] when the mounts file is missing."""
    text = read_text(roots.proc_path("self", "mounts"))
    if text is None:
        logger.debug("no %s: cgroup mounts unknown", roots.proc_path("self", "mounts"))
        return []
    return parse_mounts(text)
