"""Which CPUs the `cpuset` suppress policy gives BE: the same CPUs koordlet's calculateBESuppressCPUSetPolicy
(pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go) picks for the same topology and count.

koordlet, as hand-applied below: CPUs are bucketed by (NUMA node, socket); each bucket is sorted by (core, CPU);
buckets by size, largest first, ties by their first CPU. Whole cores: one sibling pair per bucket per turn,
round robin from bucket 0, while at least two CPUs are still needed. Single CPUs: round robin again, but from
the bucket where the whole-core turn stopped (the one after the last pair), not from bucket 0.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.system.topology import CpuInfo
from qos.cpu.cpuset_pick import pick_from_pool


def small() -> list[CpuInfo]:
    """1 socket × 2 cores × 2 threads: core 0 = CPUs 0, 2; core 1 = CPUs 1, 3."""
    return [CpuInfo(cpu=c, core=c % 2, socket=0, numa_node=0, l3=0, online=True) for c in range(4)]


def big() -> list[CpuInfo]:
    """2 sockets × 2 NUMA nodes each × 4 cores per node (8 per socket) × 2 threads = 32 CPUs, Linux numbering:
    CPU i and i + 16 are siblings; node 0 = 0-3,16-19, node 1 = 4-7,20-23 (socket 0), node 2 = 8-11,24-27,
    node 3 = 12-15,28-31 (socket 1); sysfs core ids restart at 0 on socket 1."""
    out = []
    for cpu in range(32):
        first = cpu % 16
        out.append(CpuInfo(cpu=cpu, core=first % 8, socket=first // 8, numa_node=first // 4, l3=first // 8, online=True))
    return out


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, []),
        (1, [0]),
        (2, [0, 2]),  # the pair of core 0
        (3, [0, 1, 2]),  # pair (0, 2); one bucket: the single turn wraps back to it
        (4, [0, 1, 2, 3]),
        (5, []),  # more than the pool: none
    ],
)
def test_one_socket_two_cores(count: int, expected: list[int]) -> None:
    assert pick_from_pool(count, small()) == expected


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        # Buckets (8 CPUs each, in first-CPU order): node 0 [0,16,1,17,…], node 1 [4,20,…], node 2 [8,24,…],
        # node 3 [12,28,…].
        (1, [0]),
        (2, [0, 16]),
        # Pair (0,16) from node 0 leaves one CPU to find; the pair turn stopped at node 1, so the single is 4.
        (3, [0, 4, 16]),
        # Pairs (0,16), (4,20); the single comes from node 2.
        (5, [0, 4, 8, 16, 20]),
        # Pairs from nodes 0-2; the single from node 3.
        (7, [0, 4, 8, 12, 16, 20, 24]),
        # One pair per node; the pair turn stopped after node 3, i.e. back at node 0: single 1.
        (9, [0, 1, 4, 8, 12, 16, 20, 24, 28]),
        # Four pairs, then (1,17) from node 0; the single comes from node 1: 5.
        (11, [0, 1, 4, 5, 8, 12, 16, 17, 20, 24, 28]),
        # More than one NUMA node (8 CPUs): pairs 4 + 4 + (2,18) from node 0, then the single from node 1: 6.
        (19, [0, 1, 2, 4, 5, 6, 8, 9, 12, 13, 16, 17, 18, 20, 21, 24, 25, 28, 29]),
        (32, list(range(32))),
        (33, []),
    ],
)
def test_two_sockets_four_numa_nodes(count: int, expected: list[int]) -> None:
    assert pick_from_pool(count, big()) == expected


def test_odd_count_on_unequal_nodes_continues_on_the_next_node() -> None:
    """1 socket, 2 NUMA nodes, 4 cores (siblings i, i + 4): node 0 = 0,1,4,5, node 1 = 2,3,6,7; CPU 0 is
    offline (or reserved), so node 1 (4 CPUs) is bucket 0 and node 0 (1,5,4: core 1's pair, then 4) bucket 1.
    3 CPUs: pair (2,6) from node 1, then the single from node 0: its first CPU in core order, 1."""
    pool = [CpuInfo(cpu=c, core=c % 4, socket=0, numa_node=(c % 4) // 2, l3=0, online=True) for c in range(1, 8)]
    assert pick_from_pool(3, pool) == [1, 2, 6]
    # 5: pairs (2,6), (1,5); need 1 and the pair turn is back at bucket 0: node 1's 3.
    assert pick_from_pool(5, pool) == [1, 2, 3, 5, 6]


def test_cores_are_ordered_like_lscpu_logical_core_numbers() -> None:
    """koordlet sorts a bucket by lscpu's CORE column, a logical number given in the order of each core's lowest
    CPU, not sysfs core_id. A machine whose core ids run against the CPU numbers (core 3 = CPUs 0,2, core 1 =
    CPUs 1,3) gets core {0,2} first, as from lscpu: 1 CPU is 0, 3 CPUs are pair (0,2) then 1."""
    pool = [CpuInfo(cpu=c, core=3 if c % 2 == 0 else 1, socket=0, numa_node=0, l3=0, online=True) for c in range(4)]
    assert pick_from_pool(1, pool) == [0]
    assert pick_from_pool(3, pool) == [0, 1, 2]


@st.composite
def pools(draw: st.DrawFn) -> tuple[int, list[CpuInfo]]:
    """A 2-thread topology (sockets × nodes per socket × cores per node), some CPUs taken out of the pool."""
    sockets = draw(st.integers(1, 2))
    nodes = draw(st.integers(1, 2))
    cores = draw(st.integers(1, 4))
    ncores = sockets * nodes * cores
    cpus = []
    for core in range(ncores):
        for thread in range(2):
            cpus.append(CpuInfo(cpu=core + thread * ncores, core=core, socket=core // (nodes * cores),
                                numa_node=core // cores, l3=0, online=True))
    keep = draw(st.lists(st.booleans(), min_size=len(cpus), max_size=len(cpus)))
    pool = [c for c, k in zip(cpus, keep) if k]
    count = draw(st.integers(0, len(cpus) + 1))
    return count, pool


@settings(max_examples=300, deadline=None)
@given(pools())
def test_properties_count_membership_and_whole_cores_first(case: tuple[int, list[CpuInfo]]) -> None:
    count, pool = case
    picked = pick_from_pool(count, pool)
    if count > len(pool) or count <= 0:
        assert picked == []
        return
    assert len(picked) == count and len(set(picked)) == count
    assert set(picked) <= {c.cpu for c in pool}
    cores: dict[int, set[int]] = {}
    for c in pool:
        cores.setdefault(c.core, set()).add(c.cpu)
    whole = [cpus for cpus in cores.values() if len(cpus) == 2]
    taken_whole = sum(1 for cpus in whole if cpus <= set(picked))
    assert taken_whole >= min(count // 2, len(whole))
