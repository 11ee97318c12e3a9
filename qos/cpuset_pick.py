"""Which CPUs best-effort pods get under cpuset suppress: the BE share taken from the LSR and LS pools in
proportion, whole physical cores first, spread over NUMA nodes and sockets (reference §5.1).

Pure functions over the collectors' CPU topology. The order is deterministic, so the same inputs give the
same set every round and BE processes are not shuffled between CPUs without a reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from hookserver.system.topology import CpuInfo

__all__ = ["allowed_cpus", "pick_from_pool", "split_pools", "suppress_cpuset"]


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


def pick_from_pool(count: int, pool: Sequence[CpuInfo]) -> list[int]:
    """`count` CPUs from `pool`: first whole cores (both hyper-threads), visiting the (NUMA node, socket)
    groups in turn, largest group first; then single CPUs the same way. Fewer CPUs than asked: none
    (the caller reports it; a partial pick would misstate what BE gets)."""
    if count <= 0:
        return []
    if len(pool) < count:
        return []
    groups: dict[tuple[int, int], list[CpuInfo]] = {}
    for cpu in pool:
        groups.setdefault((cpu.numa_node, cpu.socket), []).append(cpu)
    buckets = [sorted(g, key=lambda c: (c.core, c.cpu)) for g in groups.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu))
    picked: list[int] = []
    used: set[int] = set()
    need = count
    # Whole cores: one sibling pair per group per pass, while at least two CPUs are still needed.
    progress = True
    while need > 1 and progress:
        progress = False
        for bucket in buckets:
            if need <= 1:
                break
            for i in range(len(bucket) - 1):
                a, b = bucket[i], bucket[i + 1]
                if a.cpu in used or b.cpu in used or a.core != b.core:
                    continue
                picked += [a.cpu, b.cpu]
                used.update((a.cpu, b.cpu))
                need -= 2
                progress = True
                break
    # Then single CPUs, one per group per pass.
    progress = True
    while need > 0 and progress:
        progress = False
        for bucket in buckets:
            if need <= 0:
                break
            for cpu in bucket:
                if cpu.cpu not in used:
                    picked.append(cpu.cpu)
                    used.add(cpu.cpu)
                    need -= 1
                    progress = True
                    break
    return sorted(picked)


def suppress_cpuset(count: int, lsr: Sequence[CpuInfo], ls: Sequence[CpuInfo]) -> list[int]:
    """`count` CPUs split between the pools in proportion to their sizes (LSR share rounded down)."""
    total = len(lsr) + len(ls)
    if count <= 0 or total == 0:
        return []
    from_lsr = count * len(lsr) // total
    return sorted(pick_from_pool(from_lsr, lsr) + pick_from_pool(count - from_lsr, ls))


def allowed_cpus(cpus: Iterable[CpuInfo], *, excluded: frozenset[int], lse: frozenset[int]) -> frozenset[int]:
    """What BE may use when nothing suppresses it: every online CPU but reserved, exclusive-SYSTEM and LSE ones."""
    return frozenset(c.cpu for c in cpus if c.online and c.cpu not in excluded and c.cpu not in lse)
