"""Which CPUs best-effort pods get under cpuset suppress: the BE share taken from the LSR and LS pools in
proportion, whole physical cores first, spread over NUMA nodes and sockets (reference §5.1), CPU for CPU
what koordlet picks for the same topology.

Pure functions over the collectors' CPU topology. The order is deterministic, so the same inputs give the
same set every round and BE processes are not shuffled between CPUs without a reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hookserver.system.topology import CpuInfo

__all__ = ["allowed_cpus", "logical_cores", "pick_from_pool", "split_pools", "suppress_cpuset"]


def split_pools(
    cpus: Iterable[CpuInfo], *, excluded: frozenset[int], pool_of: Mapping[int, str]
) -> tuple[list[CpuInfo], list[CpuInfo]]:
    """(LSR pool, LS pool): CPUs bound to LSR pods, and the shared rest. LSE-bound, offline and `excluded`
    CPUs (the node's reserved and exclusive-SYSTEM CPUs) are in neither: the kernel refuses an offline CPU."""
    lsr: list[CpuInfo] = []
    ls: list[CpuInfo] = []
    for cpu in cpus:
        if cpu.cpu in excluded or not cpu.online:
            continue
        qos = pool_of.get(cpu.cpu, "")
        if qos == "LSR":
            lsr.append(cpu)
        elif qos != "LSE":
            ls.append(cpu)
    return lsr, ls


def logical_cores(cpus: Iterable[CpuInfo]) -> dict[tuple[int, int], int]:
    """(socket, sysfs core id) -> the core number `lscpu -e` prints, which koordlet sorts by: cores numbered in
    the order of their lowest online CPU. Offline CPUs have no topology for lscpu (koordlet skips them)."""
    lowest: dict[tuple[int, int], int] = {}
    for c in cpus:
        if c.online:
            key = (c.socket, c.core)
            lowest[key] = min(lowest.get(key, c.cpu), c.cpu)
    return {key: rank for rank, key in enumerate(sorted(lowest, key=lambda k: lowest[k]))}


def pick_from_pool(
    count: int, pool: Sequence[CpuInfo], *, core_rank: Mapping[tuple[int, int], int] | None = None
) -> list[int]:
    """`count` CPUs from `pool`, the same ones koordlet's calculateBESuppressCPUSetPolicy picks
    (pkg/koordlet/qosmanager/plugins/cpusuppress/cpu_suppress.go), so a node keeps its BE cpuset when the
    agent is swapped. Fewer CPUs than asked: none (the caller reports it; a partial pick would misstate what
    BE gets).

    Buckets are (NUMA node, socket) groups, keyed as koordlet keys them: (node + pool size) × (socket + 1).
    Each is sorted by (logical core, CPU); buckets by size, largest first, ties by their first CPU. Whole
    cores: round robin from bucket 0, one sibling pair per bucket per turn, while at least two CPUs are still
    needed; a full turn without a pair ends it. Single CPUs: round robin from the bucket where the whole-core
    turn stopped (so an odd CPU lands on the next NUMA node, not back on the first), until done or a full
    turn finds nothing. `core_rank` is `logical_cores` of the whole node (default: of the pool)."""
    if count <= 0 or len(pool) < count:
        return []
    rank = core_rank if core_rank is not None else logical_cores(pool)

    def core_of(c: CpuInfo) -> tuple[int, int]:
        return (c.socket, c.core)

    def order(c: CpuInfo) -> tuple[int, int]:
        return (rank.get(core_of(c), len(rank) + c.cpu), c.cpu)

    groups: dict[int, list[CpuInfo]] = {}
    size = len(pool)
    for cpu in pool:
        # koordlet's key, collisions included: it only merges groups on unusual node/socket numbering.
        groups.setdefault((cpu.numa_node + size) * (cpu.socket + 1), []).append(cpu)
    buckets = [sorted(g, key=order) for g in groups.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu))
    picked: list[int] = []
    used: set[int] = set()
    need = count
    i = 0
    before = -1
    while need > 1:
        if i == 0:
            if before == need:
                break
            before = need
        bucket = buckets[i]
        for j in range(len(bucket) - 1):
            if bucket[j].cpu in used:
                continue
            if core_of(bucket[j]) == core_of(bucket[j + 1]):
                picked += [bucket[j].cpu, bucket[j + 1].cpu]
                used.update((bucket[j].cpu, bucket[j + 1].cpu))
                need -= 2
                break
        i = (i + 1) % len(buckets)
    start = i
    before = -1
    while need > 0:
        if i == start:
            if before == need:
                break
            before = need
        for cpu in buckets[i]:
            if cpu.cpu not in used:
                picked.append(cpu.cpu)
                used.add(cpu.cpu)
                need -= 1
                break
        i = (i + 1) % len(buckets)
    return sorted(picked)


def suppress_cpuset(
    count: int, lsr: Sequence[CpuInfo], ls: Sequence[CpuInfo], *, core_rank: Mapping[tuple[int, int], int] | None = None
) -> list[int]:
    """`count` CPUs split between the pools in proportion to their sizes (LSR share rounded down), each pool
    picked on its own as koordlet does (so each has its own buckets and round robin)."""
    total = len(lsr) + len(ls)
    if count <= 0 or total == 0:
        return []
    rank = core_rank if core_rank is not None else logical_cores([*lsr, *ls])
    from_lsr = count * len(lsr) // total
    return sorted(pick_from_pool(from_lsr, lsr, core_rank=rank) + pick_from_pool(count - from_lsr, ls, core_rank=rank))


def allowed_cpus(cpus: Iterable[CpuInfo], *, excluded: frozenset[int], lse: frozenset[int]) -> frozenset[int]:
    """What BE may use when nothing suppresses it: every online CPU but reserved, exclusive-SYSTEM and LSE ones."""
    return frozenset(c.cpu for c in cpus if c.online and c.cpu not in excluded and c.cpu not in lse)
