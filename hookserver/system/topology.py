"""CPU topology and per-NUMA memory from sysfs: what koordlet's node-info collector gets from `lscpu -e`.

We read sysfs directly instead of running lscpu: no subprocess on a node agent, and tests bring a tree.
Per CPU: core, socket (physical package), NUMA node and L3 cache id; per NUMA node: MemTotal/MemFree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from hookserver.errors import SystemFileError
from hookserver.system.files import read_int, read_text
from hookserver.system.cpulist import parse_cpu_list
from hookserver.system.roots import SystemRoots

__all__ = [
    "CpuInfo",
    "NodeTopology",
    "NumaMemInfo",
    "read_cpu_topology",
    "read_node_topology",
    "read_numa_meminfo",
]

_CPU_DIR = re.compile(r"cpu(\d+)")
_NODE_DIR = re.compile(r"node(\d+)")


@dataclass(frozen=True, slots=True)
class CpuInfo:
    cpu: int
    core: int
    socket: int
    numa_node: int
    l3: int
    online: bool


@dataclass(frozen=True, slots=True)
class NumaMemInfo:
    node: int
    total_bytes: int
    free_bytes: int

    @property
    def used_bytes(self) -> int:
        return max(self.total_bytes - self.free_bytes, 0)


@dataclass(frozen=True, slots=True)
class NodeTopology:
    cpus: tuple[CpuInfo, ...]
    numa: tuple[NumaMemInfo, ...]

    @property
    def num_cpus(self) -> int:
        return len(self.cpus)

    @property
    def num_cores(self) -> int:
        return len({(c.socket, c.core) for c in self.cpus})

    @property
    def num_sockets(self) -> int:
        return len({c.socket for c in self.cpus})

    @property
    def num_numa_nodes(self) -> int:
        return max(len({c.numa_node for c in self.cpus}), len(self.numa))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise SystemFileError(f"cannot list {path}: {exc.strerror}", path=path) from exc


def _cpu_list_file(path: str) -> list[int] | None:
    text = read_text(path)
    if text is None:
        return None
    try:
        return sorted(parse_cpu_list(text))
    except ValueError as exc:
        raise SystemFileError(f"{path}: {exc}", path=path) from exc


def _l3_id(cpu_dir: str, cpu: int) -> int:
    """The id of the level-3 cache this CPU uses; without an `id` file, the lowest CPU sharing it."""
    cache_dir = f"{cpu_dir}/cache"
    for index in sorted(_listdir(cache_dir)):
        if not index.startswith("index"):
            continue
        if (read_text(f"{cache_dir}/{index}/level") or "").strip() != "3":
            continue
        cache_id = read_int(f"{cache_dir}/{index}/id")
        if cache_id is not None:
            return cache_id
        shared = _cpu_list_file(f"{cache_dir}/{index}/shared_cpu_list")
        return min(shared) if shared else cpu
    return -1


def read_cpu_topology(roots: SystemRoots) -> tuple[CpuInfo, ...]:
    base = roots.sys_path("devices", "system", "cpu")
    online = set(_cpu_list_file(f"{base}/online") or [])
    node_of: dict[int, int] = {}
    node_base = roots.sys_path("devices", "system", "node")
    for name in _listdir(node_base):
        match = _NODE_DIR.fullmatch(name)
        if match:
            for cpu in _cpu_list_file(f"{node_base}/{name}/cpulist") or []:
                node_of[cpu] = int(match.group(1))
    cpus: list[CpuInfo] = []
    for name in _listdir(base):
        match = _CPU_DIR.fullmatch(name)
        if not match:
            continue
        cpu = int(match.group(1))
        cpu_dir = f"{base}/{name}"
        core = read_int(f"{cpu_dir}/topology/core_id")
        socket = read_int(f"{cpu_dir}/topology/physical_package_id")
        cpus.append(
            CpuInfo(
                cpu=cpu,
                core=cpu if core is None else core,
                socket=0 if socket is None else socket,
                numa_node=node_of.get(cpu, 0),
                l3=_l3_id(cpu_dir, cpu),
                online=(cpu in online) if online else True,
            )
        )
    return tuple(sorted(cpus, key=lambda c: c.cpu))


def read_numa_meminfo(roots: SystemRoots) -> tuple[NumaMemInfo, ...]:
    """`/sys/devices/system/node/node<N>/meminfo` (`Node 0 MemTotal: 123 kB`) per NUMA node."""
    base = roots.sys_path("devices", "system", "node")
    out: list[NumaMemInfo] = []
    for name in _listdir(base):
        match = _NODE_DIR.fullmatch(name)
        if not match:
            continue
        path = f"{base}/{name}/meminfo"
        text = read_text(path)
        if text is None:
            continue
        values: dict[str, int] = {}
        for line in text.splitlines():
            head, sep, rest = line.partition(":")
            parts = rest.split()
            if sep and parts and parts[0].isdigit() and head.split():
                values[head.split()[-1]] = int(parts[0]) * (1024 if len(parts) > 1 and parts[1] == "kB" else 1)
        if "MemTotal" not in values or "MemFree" not in values:
            raise SystemFileError(f"{path}: MemTotal or MemFree missing", path=path)
        out.append(NumaMemInfo(node=int(match.group(1)), total_bytes=values["MemTotal"], free_bytes=values["MemFree"]))
    return tuple(sorted(out, key=lambda n: n.node))


def read_node_topology(roots: SystemRoots) -> NodeTopology:
    return NodeTopology(cpus=read_cpu_topology(roots), numa=read_numa_meminfo(roots))
