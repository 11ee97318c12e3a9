"""The node's kernel knobs as the part-2 reconcilers see them (CPU burst, memory QoS, system config, blkio,
resctrl): per-pod and per-container CFS files and limits, which optional files this kernel has, the vm
sysctls and their recorded originals, the block devices NodeSLO names, and the resctrl filesystem.

Read once per round by `qos.kernel_readers.KernelReader` (only the parts whose feature gate is on), carried
in `QoSSnapshot.kernel`, so each planner stays pure and tests script it with the reference's numbers.
Units: CPU in milli-cores, CFS times in µs, memory in bytes, `mem_total_kib` in KiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.system.tc import TcClass

__all__ = [
    "NODE_SETTINGS",
    "BlockDevice",
    "ContainerKernel",
    "CoreSchedFacts",
    "KernelFacts",
    "OOMFacts",
    "PodKernel",
    "ProcessScore",
    "ResctrlFacts",
    "SysctlFacts",
    "TcFacts",
]

_NO_STR: Mapping[str, str] = MappingProxyType({})

# The node-wide settings system config manages: name -> (root, path under it). "proc_sys" is
# `<proc-root>/sys`, "sys" is `<sys-root>`. The memcg reaper is Anolis-only (koordlet's
# /sys/kernel/mm/memcg_reaper/reap_background); it is left alone where the file does not exist.
NODE_SETTINGS: Mapping[str, tuple[str, str]] = MappingProxyType({
    "vm.min_free_kbytes": ("proc_sys", "vm/min_free_kbytes"),
    "vm.watermark_scale_factor": ("proc_sys", "vm/watermark_scale_factor"),
    "memcg_reaper.reap_background": ("sys", "kernel/mm/memcg_reaper/reap_background"),
})


@dataclass(frozen=True, slots=True)
class ContainerKernel:
    """One container: its cgroup dir (relative to each hierarchy root), spec limits (0 = none; BE pods'
    memory from batch-memory), the CFS files now (None = unreadable or absent), the collectors' latest
    throttled ratio, CPU and memory usage (the flight recorder keeps them per container), and its task ids
    (read only for resctrl)."""

    id: str
    name: str
    dir: str
    cpu_limit_milli: int = 0
    memory_request_bytes: int = 0
    memory_limit_bytes: int = 0
    quota_us: int | None = None
    period_us: int = 100_000
    burst_us: int | None = None
    throttled_ratio: float | None = None
    cpu_usage_cores: float | None = None
    memory_usage_bytes: float | None = None
    tasks: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class PodKernel:
    """A pod's dir and CFS quota now; `cpu_limit_milli` / `memory_*` are sums over containers, 0 when
    any container has none (an unlimited container makes the pod unlimited)."""

    uid: str
    dir: str
    containers: tuple[ContainerKernel, ...] = ()
    quota_us: int | None = None
    period_us: int = 100_000
    cpu_limit_milli: int = 0
    memory_request_bytes: int = 0
    memory_limit_bytes: int = 0


@dataclass(frozen=True, slots=True)
class SysctlFacts:
    """`values`: vm sysctl name -> its value now, None when this kernel has no such file.
    `originals`: what the agent recorded before its first write (state dir), by sysctl name."""

    mem_total_kib: int = 0
    values: Mapping[str, int | None] = field(default_factory=lambda: MappingProxyType({}))
    originals: Mapping[str, str] = field(default_factory=lambda: _NO_STR)


@dataclass(frozen=True, slots=True)
class BlockDevice:
    """A NodeSLO block config resolved to `maj:min` (empty with `problem` when it cannot be)."""

    name: str
    type: str
    devno: str = ""
    problem: str = ""


@dataclass(frozen=True, slots=True)
class ResctrlFacts:
    """The resctrl filesystem. `problem` non-empty: unusable (not mounted, no CAT and no MBA). `cbm_bits`
    is the width of `info/L3/cbm_mask`; `l3_domains` / `mb_domains` the cache / memory domain ids from the
    root `schemata`; `groups` what each existing group's `schemata` holds; `group_tasks` its tasks."""

    root_exists: bool = False
    problem: str = ""
    cat: bool = False
    mba: bool = False
    cbm_bits: int = 0
    min_cbm_bits: int = 1
    num_closids: int = 0
    l3_domains: tuple[str, ...] = ()
    mb_domains: tuple[str, ...] = ()
    mba_min: int = 10
    mba_gran: int = 10
    vendor: str = "intel"
    groups: Mapping[str, str] = field(default_factory=lambda: _NO_STR)
    group_tasks: Mapping[str, frozenset[int]] = field(default_factory=lambda: MappingProxyType({}))
    created: frozenset[str] = frozenset()
    # Pod-level groups (`koordlet-<pod uid>`, the Resctrl hook's): schemata and tasks of each one there, and the
    # ones this agent created (state dir section `resctrl_pod_groups`).
    pod_groups: Mapping[str, str] = field(default_factory=lambda: _NO_STR)
    pod_group_tasks: Mapping[str, frozenset[int]] = field(default_factory=lambda: MappingProxyType({}))
    pod_created: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class ProcessScore:
    """One process of a container: its pid, its start time (clock ticks since boot: with the pid, the key that
    survives pid reuse) and its `oom_score_adj` now."""

    pid: int
    start_ticks: int
    score: int


@dataclass(frozen=True, slots=True)
class OOMFacts:
    """For OOMScoreAdj: the processes of each container (by container id) of the pods that carry an
    oom-score-adj annotation, and the originals recorded before the agent's first change (process key ->
    value) that still belong to a live process (the reader forgets the others). `can_lower`: the agent holds
    CAP_SYS_RESOURCE (without it the kernel refuses to lower a score below the runtime's)."""

    processes: Mapping[str, tuple[ProcessScore, ...]] = field(default_factory=lambda: MappingProxyType({}))
    originals: Mapping[str, str] = field(default_factory=lambda: _NO_STR)
    can_lower: bool = True


@dataclass(frozen=True, slots=True)
class TcFacts:
    """For TCNetworkQoS: the egress traffic-control tree of the node's interface. `problem` non-empty: nothing
    can be done (no `tc`, no interface), said once as the reconciler's status. `recorded` is the root qdisc kind
    the interface had before the agent replaced it (state dir; "" when the agent has not). `cgroup_prefs` the
    preferences of the `cgroup` filters under 1:. `net_cls`: each pod's `net_cls.classid` now (by uid; only on
    cgroup v1 with a net_cls hierarchy, `net_cls_root` non-empty)."""

    interface: str = ""
    problem: str = ""
    root_kind: str = ""
    root_handle: str = ""
    classes: Mapping[str, TcClass] = field(default_factory=lambda: MappingProxyType({}))
    cgroup_prefs: frozenset[int] = frozenset()
    recorded: str = ""
    net_cls_root: str = ""
    net_cls: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class CoreSchedFacts:
    """For CoreSched: `problem` non-empty when the node cannot do core scheduling (no PR_SCHED_CORE, no SMT);
    else the processes of each container (by container id) with their cookie now (pid, cookie; 0 = default).
    A process whose cookie could not be read is left out."""

    problem: str = ""
    processes: Mapping[str, tuple[tuple[int, int], ...]] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True, slots=True)
class KernelFacts:
    """`tiers`: the kubelet QoS dirs ("kubepods", "burstable", "besteffort"); `cgroup_files`: which optional
    cgroup files exist at the kubepods dir (cpu.cfs_burst_us, memory.min, memory.wmark_ratio, ...)."""

    read: frozenset[str] = frozenset()  # which parts were read this round ("pods", "sysctl", "blkio", "resctrl", "oom")
    v2: bool = False
    tiers: Mapping[str, str] = field(default_factory=lambda: _NO_STR)
    cgroup_files: frozenset[str] = frozenset()
    pods: Mapping[str, PodKernel] = field(default_factory=lambda: MappingProxyType({}))
    sysctl: SysctlFacts = field(default_factory=SysctlFacts)
    devices: tuple[BlockDevice, ...] = ()
    resctrl: ResctrlFacts = field(default_factory=ResctrlFacts)
    oom: OOMFacts = field(default_factory=OOMFacts)
    tc: TcFacts = field(default_factory=TcFacts)
    core_sched: CoreSchedFacts = field(default_factory=CoreSchedFacts)
