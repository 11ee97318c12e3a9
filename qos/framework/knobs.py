"""Who owns which node knob: ONE owner per (file, level, QoS class), checked when the agent starts.

koordinator#2306: batchresource, CPU suppress and CPU burst all wrote `cpu.cfs_quota_us`, and whichever
wrote last won for a second. Here every feature that writes a knob claims it in `OWNERSHIP` below, and
`check_knob_owners` refuses to start (ConfigError) when two features that run claim the same knob at the
same level for an overlapping QoS class. A reconciler may add claims in a `knob_claims` class attribute;
they are checked the same way.

Levels: `root` (the hierarchy root / node-wide files), `tier` (the kubelet QoS dirs: kubepods,
burstable, besteffort), `pod`, `container`, `node` (sysctls, resctrl). QoS: LSE, LSR, LS, BE, SYSTEM or
`*` (every class).

The decisions (and why):
* batchresource (the hook, and its reconciler that re-applies hook values to running pods) owns BE pods'
  and containers' `cpu.shares`, `cpu.cfs_quota_us` and `memory.limit_in_bytes`: they follow the pod's
  batch-cpu / batch-memory, which only the hook knows at create time.
* CPU suppress owns the BE tier's `cpu.cfs_quota_us` and every BE `cpuset.cpus` (tier, pods, containers):
  it throttles BE as a whole; the per-pod BE quota stays the hook's, so the two never fight.
* CPU burst owns LS containers' `cpu.cfs_burst_us` and LS pods' and containers' `cpu.cfs_quota_us`
  (quota burst scales them between base and ceiling). The kubelet sets that base at create time and does
  not rewrite it, so the only other writer is the kubelet's resize, which CPU burst reads as the new base.
* CPUSetAllocator (the hook) owns LSE/LSR/LS/SYSTEM containers' and pod sandboxes' `cpuset.cpus` (the
  scheduler's CPUs or the share pool), LS host applications' (NodeSLO `hostApplications`) and LSE/LSR pods' and
  containers' `cpu.cfs_quota_us` (unset for a cpuset pod, koordinator#489); GroupIdentity's PreRunPodSandbox hook
  writes under the reconciler's claim (same rule, same owner name);
  BE cpusets stay CPU suppress's, LS quota CPU burst's.
* CPUNormalization (the hook) owns LS pods' and containers' `cpu.cfs_quota_us` only while CPU burst's gate is
  off (it stands down otherwise, koordinator#2306, and CPU burst works on the normalized quota instead), so the
  two claims never meet in one running agent.
* GroupIdentity owns `cpu.bvt_warp_ns` everywhere and BE pods' `cpu.idle` (never the tier's: koordinator#2732).
* memory QoS owns memory.min/low/high and the Anolis wmark/priority/oom files at every level and class.
* system config owns the vm sysctls; resctrl the three resctrl groups; blkio the BE tier's and BE pods'
  throttles and cost.weight, and the root iocost files.
* PodResctrl (koordlet's Resctrl hook) owns the pod-level `koordlet-<uid>` groups' schemata and the tasks of
  annotated pods (the class-level Resctrl leaves those tasks alone while the gate is on).
* TCNetworkQoS owns the node interface's egress tc tree (root htb 1: and its classes and filters) and pods'
  net_cls.classid.
* CoreSched owns the core-scheduling cookies of non-SYSTEM pods' processes (cpu.idle stays GroupIdentity's).
* OOMScoreAdj owns the `oom_score_adj` of the processes of annotated pods' containers (every class): the
  runtime sets it once at container start from the kubelet's value and nothing else rewrites it.
* The kubelet owns the QoS tiers' `cpu.shares` and memory limits (seed 003: rewritten every 60 s); no
  feature here claims them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from hookserver.errors import ConfigError

__all__ = ["OWNERSHIP", "KnobClaim", "check_knob_owners", "claims_of", "check_running_features"]

LEVELS = ("root", "tier", "pod", "container", "sandbox", "host", "node")  # host: a NodeSLO host application
QOS = ("LSE", "LSR", "LS", "BE", "SYSTEM", "*")


@dataclass(frozen=True, slots=True)
class KnobClaim:
    file: str
    level: str
    qos: str = "*"

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"knob claim {self.file}: level {self.level!r} not one of {LEVELS}")
        if self.qos not in QOS:
            raise ValueError(f"knob claim {self.file}: qos {self.qos!r} not one of {QOS}")

    def overlaps(self, other: KnobClaim) -> bool:
        return (self.file == other.file and self.level == other.level
                and (self.qos == other.qos or "*" in (self.qos, other.qos)))

    def __str__(self) -> str:
        return f"{self.file} at {self.level} level for {self.qos}"


def _claims(files: Iterable[str], levels: Iterable[str], qos: Iterable[str]) -> tuple[KnobClaim, ...]:
    return tuple(KnobClaim(f, lv, q) for f in files for lv in levels for q in qos)


_MEMORY_QOS_FILES = ("memory.min", "memory.low", "memory.high", "memory.wmark_ratio", "memory.wmark_scale_factor",
                     "memory.wmark_min_adj", "memory.priority", "memory.use_priority_oom", "memory.oom.group")
_BLKIO_THROTTLES = ("blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
                    "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device", "blkio.cost.weight")

# Feature (hook plugin or reconciler name) -> the knobs it owns.
OWNERSHIP: Mapping[str, tuple[KnobClaim, ...]] = MappingProxyType({
    "batchresource": _claims(("cpu.shares", "cpu.cfs_quota_us", "memory.limit_in_bytes"), ("pod", "container"), ("BE",)),
    "CPUSuppress": (KnobClaim("cpu.cfs_quota_us", "tier", "BE"),
                    *_claims(("cpuset.cpus",), ("tier", "pod", "container"), ("BE",))),
    "CPUBurst": (KnobClaim("cpu.cfs_burst_us", "container", "LS"),
                 *_claims(("cpu.cfs_quota_us",), ("pod", "container"), ("LS",))),
    "CPUSetAllocator": (*_claims(("cpuset.cpus",), ("container", "sandbox"), ("LSE", "LSR", "LS", "SYSTEM")),
                        KnobClaim("cpuset.cpus", "host", "LS"),
                        *_claims(("cpu.cfs_quota_us",), ("pod", "container"), ("LSE", "LSR"))),
    "CPUNormalization": _claims(("cpu.cfs_quota_us",), ("pod", "container"), ("LS",)),
    "GroupIdentity": (*_claims(("cpu.bvt_warp_ns",), ("tier", "pod", "container", "host"), ("*",)),
                      KnobClaim("cpu.idle", "pod", "BE")),
    "MemoryQoS": _claims(_MEMORY_QOS_FILES, ("tier", "pod", "container"), ("*",)),
    "SystemConfig": _claims(("vm.min_free_kbytes", "vm.watermark_scale_factor", "memcg_reaper.reap_background"), ("node",), ("*",)),
    "BlkIO": (*_claims(_BLKIO_THROTTLES, ("tier", "pod"), ("BE",)),
              *_claims(("blkio.cost.qos", "blkio.cost.model"), ("root",), ("*",))),
    "Resctrl": _claims(("resctrl.schemata", "resctrl.tasks"), ("node",), ("*",)),
    "OOMScoreAdj": _claims(("oom_score_adj",), ("container",), ("*",)),
    "PodResctrl": _claims(("resctrl.schemata", "resctrl.tasks"), ("pod",), ("*",)),
    "TCNetworkQoS": (KnobClaim("tc.egress", "node", "*"), KnobClaim("net_cls.classid", "pod", "*")),
    "CoreSched": _claims(("core_sched.cookie",), ("container",), ("LSE", "LSR", "LS", "BE")),
})


def claims_of(feature: str, extra: Sequence[KnobClaim] = ()) -> tuple[KnobClaim, ...]:
    return (*OWNERSHIP.get(feature, ()), *extra)


def check_knob_owners(features: Mapping[str, Sequence[KnobClaim]]) -> dict[str, list[str]]:
    """Raise ConfigError if two features claim one knob; else return knob -> owner (for `hookctl qos`)."""
    seen: list[tuple[KnobClaim, str]] = []
    conflicts: list[str] = []
    for feature, claims in features.items():
        for claim in claims:
            for other, owner in seen:
                if owner != feature and claim.overlaps(other):
                    conflicts.append(f"{claim} is claimed by both {owner} and {feature}")
            seen.append((claim, feature))
    if conflicts:
        raise ConfigError("knob ownership conflict (one owner per file, level and QoS class): " + "; ".join(sorted(set(conflicts))))
    table: dict[str, list[str]] = {}
    for claim, owner in seen:
        table.setdefault(owner, []).append(str(claim))
    return table


def check_running_features(reconcilers: Iterable[object], hooks: Iterable[str]) -> dict[str, list[str]]:
    """The start-time check over what this agent runs: the hook plugins by name and the reconcilers
    (their `name` and optional `knob_claims`)."""
    features: dict[str, Sequence[KnobClaim]] = {h: claims_of(h) for h in hooks}
    for r in reconcilers:
        name = str(getattr(r, "name", ""))
        features[name] = claims_of(name, tuple(getattr(r, "knob_claims", ())))
    return check_knob_owners(features)
