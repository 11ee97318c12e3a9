"""Fixture sysfs and procfs trees for the topology tests: the files koordlet's lscpu and hookserver's
`hookserver.system.topology` read, nothing else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hookserver.system import SystemRoots
from hookserver.system.cpulist import format_cpu_list


@dataclass(frozen=True)
class Cpu:
    cpu: int
    core: int
    socket: int
    node: int
    online: bool = True


def write_tree(root: Path, cpus: list[Cpu], mem_kb: dict[int, int], *, smt: bool = False,
               model: str = "Intel(R) Xeon(R) Platinum 8269CY CPU @ 2.50GHz", no_turbo: str | None = "0") -> SystemRoots:
    sys = root / "sys"
    base = sys / "devices/system"
    (base / "cpu").mkdir(parents=True)
    (base / "cpu/online").write_text(format_cpu_list({c.cpu for c in cpus if c.online}) + "\n")
    for c in cpus:
        d = base / f"cpu/cpu{c.cpu}"
        d.mkdir()
        if c.online:  # the kernel removes an offline CPU's topology directory
            (d / "topology").mkdir()
            (d / "topology/core_id").write_text(f"{c.core}\n")
            (d / "topology/physical_package_id").write_text(f"{c.socket}\n")
    for node, kb in mem_kb.items():
        d = base / f"node/node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(format_cpu_list({c.cpu for c in cpus if c.node == node and c.online}) + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {kb} kB\nNode {node} MemFree:        {kb // 2} kB\n")
    (base / "cpu/smt").mkdir()
    (base / "cpu/smt/active").write_text("1\n" if smt else "0\n")
    if no_turbo is not None:
        (base / "cpu/intel_pstate").mkdir()
        (base / "cpu/intel_pstate/no_turbo").write_text(no_turbo + "\n")
    proc = root / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: {model}\n\n")
    return SystemRoots(proc=str(proc), sys=str(sys), cgroup=str(root / "cg"))


def one_socket_two_cores() -> tuple[list[Cpu], dict[int, int]]:
    return [Cpu(0, 0, 0, 0), Cpu(1, 1, 0, 0)], {0: 4 * 1024 * 1024}


def two_sockets_two_numa_eight_cores_two_threads() -> tuple[list[Cpu], dict[int, int]]:
    """2 sockets x 2 NUMA nodes each x 8 cores each x 2 threads: 64 CPUs, Linux numbering (first threads 0-31,
    their siblings 32-63); socket 0 holds NUMA nodes 0-1, socket 1 nodes 2-3; sysfs core ids restart per socket."""
    cpus = []
    for thread in range(2):
        for first in range(32):
            socket, node = first // 16, first // 8
            cpus.append(Cpu(first + 32 * thread, first % 16, socket, node))
    return sorted(cpus, key=lambda c: c.cpu), {n: 64 * 1024 * 1024 for n in range(4)}


def one_socket_two_numa_four_cpus_each() -> tuple[list[Cpu], dict[int, int]]:
    """1 socket, NUMA nodes 0 (CPUs 0-3) and 1 (CPUs 4-7), 16 GiB each: the two zones of the NUMA batch tests."""
    return [Cpu(i, i, 0, i // 4) for i in range(8)], {0: 16 * 1024 * 1024, 1: 16 * 1024 * 1024}
