"""Hugepages per NUMA node: `/sys/devices/system/node/node<N>/hugepages/hugepages-<size>kB/{nr_hugepages,
free_hugepages}`, for koordlet's `HugePageReport` (`GetNodeHugePagesInfo` in `pkg/koordlet/util/meminfo.go`).

Only the two sizes Kubernetes names as resources are kept, 2048 kB (`hugepages-2Mi`) and 1048576 kB
(`hugepages-1Gi`), as koordlet keeps them; another size is skipped. A size directory without a readable number
counts no pages and is named in `problems` (koordlet skips an unparsable `nr_hugepages` the same way), so one bad
file never costs the report of the others; a node without a `hugepages` directory has none.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hookserver.errors import SystemFileError
from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = ["HUGEPAGE_SIZES_KB", "NumaHugePages", "read_numa_hugepages"]

# page size in kB -> the Kubernetes resource name of that size
HUGEPAGE_SIZES_KB: dict[int, str] = {2048: "hugepages-2Mi", 1048576: "hugepages-1Gi"}

_NODE_DIR = re.compile(r"node(\d+)")
_SIZE_DIR = re.compile(r"hugepages-(\d+)kB")


@dataclass(frozen=True, slots=True)
class NumaHugePages:
    """One NUMA node's pool of one page size."""

    node: int
    size_kb: int
    total: int  # nr_hugepages
    free: int  # free_hugepages

    @property
    def resource(self) -> str:
        return HUGEPAGE_SIZES_KB[self.size_kb]

    @property
    def total_bytes(self) -> int:
        return self.total * self.size_kb * 1024


def _pages(path: str, problems: list[str]) -> int | None:
    try:
        text = read_text(path)
    except SystemFileError as exc:
        problems.append(str(exc))
        return None
    if text is None:
        return None
    token = text.strip()
    if not token.isdigit():
        problems.append(f"{path}: not a page count: {token[:32]!r}")
        return None
    return int(token)


def _listdir(path: str) -> list[str]:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def read_numa_hugepages(roots: SystemRoots) -> tuple[tuple[NumaHugePages, ...], tuple[str, ...]]:
    """Every (node, size) pool of the two Kubernetes sizes, sorted by node and size, and the files that did not
    read. Never raises: a bad file counts no pages."""
    base = roots.sys_path("devices", "system", "node")
    pools: list[NumaHugePages] = []
    problems: list[str] = []
    for name in _listdir(base):
        node = _NODE_DIR.fullmatch(name)
        if not node:
            continue
        hugepages = os.path.join(base, name, "hugepages")
        for size_dir in _listdir(hugepages):
            size = _SIZE_DIR.fullmatch(size_dir)
            if not size or int(size.group(1)) not in HUGEPAGE_SIZES_KB:
                continue
            total = _pages(os.path.join(hugepages, size_dir, "nr_hugepages"), problems)
            free = _pages(os.path.join(hugepages, size_dir, "free_hugepages"), problems)
            pools.append(NumaHugePages(node=int(node.group(1)), size_kb=int(size.group(1)), total=total or 0,
                                       free=free or 0))
    return tuple(sorted(pools, key=lambda p: (p.node, p.size_kb))), tuple(problems)
