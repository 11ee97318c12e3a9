"""Per-NUMA-node inputs of NodeMetric's `numaUsages` (koordinator #3138): per-CPU ticks, which CPUs each NUMA
node holds, each node's memory in use, and a cgroup's memory per NUMA node.

koordlet measures the same things (pkg/koordlet/util/stat.go `GetPerCPUStatUsageTicks`,
pkg/koordlet/util/meminfo.go `NUMAMemUsageBytes`, pkg/koordlet/util/system `ParseMemoryNumaStat[V2]`). Per-CPU
busy time uses the same fields as hookserver's node CPU usage (`procfs.CpuTicks`), so the NUMA nodes add up
to the node figure. Pure parsers plus thin readers over `SystemRoots`: tests bring a tree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hookserver.errors import SystemFileError
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.files import read_text
from hookserver.system.roots import SystemRoots

__all__ = [
    "CpuTick",
    "NumaMemory",
    "parse_numa_meminfo",
    "parse_numa_stat",
    "parse_per_cpu_ticks",
    "read_numa_cpus",
    "read_numa_memory",
    "read_per_cpu_ticks",
]

_NODE_DIR = re.compile(r"node(\d+)")


@dataclass(frozen=True, slots=True)
class CpuTick:
    """One `cpuN` line of /proc/stat: busy = user+nice+system+irq+softirq+steal, total = busy+idle+iowait."""

    busy: int
    total: int


def parse_per_cpu_ticks(text: str, path: str = "/proc/stat") -> dict[int, CpuTick]:
    """CPU id -> ticks, from the `cpuN` lines (the kernel lists online CPUs only)."""
    out: dict[int, CpuTick] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        fields = line.split()
        if not fields[0][3:].isdigit():
            continue
        try:
            values = [int(x) for x in fields[1:9]]
        except ValueError as exc:
            raise SystemFileError(f"{path}: {fields[0]} line has a non-integer field: {line[:80]!r}", path=path) from exc
        if len(values) < 4:
            raise SystemFileError(f"{path}: {fields[0]} line has fewer than 4 fields", path=path)
        values += [0] * (8 - len(values))
        user, nice, system, idle, iowait, irq, softirq, steal = values
        busy = user + nice + system + irq + softirq + steal
        out[int(fields[0][3:])] = CpuTick(busy=busy, total=busy + idle + iowait)
    return out


def read_per_cpu_ticks(roots: SystemRoots) -> dict[int, CpuTick] | None:
    path = roots.proc_path("stat")
    text = read_text(path)
    return None if text is None else parse_per_cpu_ticks(text, path)


def _node_dirs(roots: SystemRoots) -> list[tuple[int, str]]:
    base = roots.sys_path("devices", "system", "node")
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SystemFileError(f"cannot list {base}: {exc.strerror}", path=base) from exc
    out = []
    for name in names:
        match = _NODE_DIR.fullmatch(name)
        if match:
            out.append((int(match.group(1)), f"{base}/{name}"))
    return sorted(out)


def read_numa_cpus(roots: SystemRoots) -> dict[int, frozenset[int]]:
    """NUMA node -> its CPUs (`node<N>/cpulist`); {} on a host without node directories."""
    out: dict[int, frozenset[int]] = {}
    for node, path in _node_dirs(roots):
        text = read_text(f"{path}/cpulist")
        if text is None:
            continue
        try:
            out[node] = frozenset(parse_cpu_list(text))
        except ValueError as exc:
            raise SystemFileError(f"{path}/cpulist: {exc}", path=f"{path}/cpulist") from exc
    return out


@dataclass(frozen=True, slots=True)
class NumaMemory:
    """The fields of `node<N>/meminfo` koordlet's NUMA memory usage needs, in bytes."""

    node: int
    total: int
    free: int
    active_file: int
    inactive_file: int
    sreclaimable: int

    @property
    def used(self) -> int:
        """koordlet's `NUMAMemUsageBytes`: the per-node meminfo has no MemAvailable, so available is estimated
        as MemFree + Active(file) + Inactive(file) + SReclaimable; used = MemTotal − that, never negative."""
        return max(self.total - (self.free + self.active_file + self.inactive_file + self.sreclaimable), 0)


_NUMA_FIELDS = {"MemTotal": "total", "MemFree": "free", "Active(file)": "active_file",
                "Inactive(file)": "inactive_file", "SReclaimable": "sreclaimable"}


def parse_numa_meminfo(node: int, text: str, path: str) -> NumaMemory:
    """`Node 0 MemTotal:  123 kB` lines; MemTotal and MemFree are required, the others count 0 when absent."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        words = head.split()
        parts = rest.split()
        if not sep or not words or not parts or words[-1] not in _NUMA_FIELDS:
            continue
        try:
            number = int(parts[0])
        except ValueError as exc:
            raise SystemFileError(f"{path}: {words[-1]} is not an integer: {line[:80]!r}", path=path) from exc
        values[_NUMA_FIELDS[words[-1]]] = number * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
    if "total" not in values or "free" not in values:
        raise SystemFileError(f"{path}: MemTotal or MemFree missing", path=path)
    return NumaMemory(node=node, total=values["total"], free=values["free"],
                      active_file=values.get("active_file", 0), inactive_file=values.get("inactive_file", 0),
                      sreclaimable=values.get("sreclaimable", 0))


def read_numa_memory(roots: SystemRoots) -> tuple[NumaMemory, ...]:
    """Every NUMA node whose meminfo reads, by node id; () without node directories."""
    out = []
    for node, path in _node_dirs(roots):
        text = read_text(f"{path}/meminfo")
        if text is not None:
            out.append(parse_numa_meminfo(node, text, f"{path}/meminfo"))
    return tuple(out)


def parse_numa_stat(text: str, path: str, *, v2: bool, page_size: int) -> dict[int, int]:
    """A cgroup's memory per NUMA node in bytes (page cache included, as koordlet's pod collector sums it).

    cgroup v2: the `anon` plus `file` lines (bytes). cgroup v1: `hierarchical_total=` pages × page size, or
    `total=` where the kernel has no hierarchical lines. koordlet reads the first (`total=`) line on v1, which
    counts only the pages charged to the pod cgroup itself, not to its containers (where a pod's processes
    are): nearly 0, which would report nearly all of a NUMA node's memory as system usage. Raises on a
    malformed file."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, _ = line.partition(" ") if v2 else line.partition("=")
        if sep:
            found.setdefault(key, line)
    if v2:
        keys: tuple[str, ...] = ("anon", "file")
    else:
        keys = ("hierarchical_total",) if "hierarchical_total" in found else ("total",)
    missing = [k for k in keys if k not in found]
    if missing:
        raise SystemFileError(f"{path}: no {' or '.join(missing)} line", path=path)
    out: dict[int, int] = {}
    for key in keys:
        for item in found[key].split()[1:]:
            name, sep, value = item.partition("=")
            if not sep or not name.startswith("N") or not name[1:].isdigit() or not value.isdigit():
                raise SystemFileError(f"{path}: malformed {key} entry {item[:40]!r}", path=path)
            node = int(name[1:])
            out[node] = out.get(node, 0) + int(value) * (1 if v2 else page_size)
    return out
