"""Memory QoS / cgroup reconcile (koordlet's cgreconcile; gate CgroupReconcile, off by default; every 1 s;
reference §5.5): memory.min / memory.low / memory.high for QoS tiers, pods and containers, from NodeSLO
`resourceQOSStrategy.<class>.memoryQOS` (LSE uses LSR's class), in leveled plans, kubelet's QoS dirs [kubepods,
tiers] first, then [pods, containers], so parents are raised before children while growing.

Per pod and container (BE: `kubernetes.io/batch-memory` request and limit):
  memory.min  = request × minLimitPercent / 100
  memory.low  = max(request × lowLimitPercent / 100, memory.min)
  memory.high = max (−1) when throttlingPercent is 0, else
                request + (limit − request) × throttlingPercent / 100 (node allocatable when no limit),
                rounded down to a page, at least memory.min
A class whose memoryQOS is disabled gets 0 / 0 / max (the kernel defaults), so switching it off undoes it.
The tiers (and kubepods) get min and low = the sum of their pods', so the protection children ask for is
not capped by a parent. Anolis files (memory.wmark_ratio, wmark_scale_factor, wmark_min_adj, priority,
use_priority_oom, oom.group) are written only where the kernel has them. On a kernel without memory.min
(plain cgroup v1) the round is one "unsupported on this kernel" status, not an error per pod.

Knobs (qos.framework.knobs): memory.min/low/high and the Anolis files, every level, every class.
"""

from __future__ import annotations

import functools
import mmap
import os
import zlib
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.executor.plan import CgroupResource, CgroupWrite, ResourcePlan
from hookserver.slo.qos import MemoryQOS, ResourceQOS

from hookserver.featuregates import FeatureGate
from qos.framework.plan import QoSPlan, numbers
from qos.framework.reconciler import Reconciler, Verdict
from qos.snapshot.model import QoSSnapshot

__all__ = ["MemoryQoS", "MemoryQoSState", "memory_values"]

PAGE = mmap.PAGESIZE
# A pod whose inputs did not change is planned again once per this many seconds (its slot, by UID hash),
# so a quiet node plans a few pods per round instead of all of them, and a file someone else changed is
# still put right within a minute. Tiers are planned (and compared) every round.
REFRESH_SLOTS = 60
_ANOLIS = (
    (CgroupResource.MEMORY_WMARK_RATIO, "wmark_ratio"),
    (CgroupResource.MEMORY_WMARK_SCALE_FACTOR, "wmark_scale_permill"),
    (CgroupResource.MEMORY_WMARK_MIN_ADJ, "wmark_min_adj"),
    (CgroupResource.MEMORY_PRIORITY, "priority"),
    (CgroupResource.MEMORY_USE_PRIORITY_OOM, "priority_enable"),
    (CgroupResource.MEMORY_OOM_GROUP, "oom_kill_group"),
)


@dataclass(frozen=True, slots=True)
class MemoryQoSState:
    """Per pod UID: the inputs last planned (a signature) and the (min, low, high) they gave, for the tier sums
    and the round's totals (high −1: max);
    `wrote`: this agent has set something (so turning every class off resets it)."""

    pods: Mapping[str, tuple[Hashable, tuple[int, int, int]]] = field(default_factory=lambda: MappingProxyType({}))
    wrote: bool = False


def memory_values(cfg: MemoryQOS, request: int, limit: int, allocatable: int) -> tuple[int, int, int]:
    """(memory.min, memory.low, memory.high) in bytes; high −1 means max."""
    if not cfg.enable:
        return 0, 0, -1
    mem_min = request * cfg.min_limit_percent // 100
    mem_low = max(request * cfg.low_limit_percent // 100, mem_min)
    if cfg.throttling_percent == 0:
        return mem_min, mem_low, -1
    ceiling = limit if limit > 0 else allocatable
    if ceiling <= 0:
        return mem_min, mem_low, -1
    high = request + (max(ceiling - request, 0)) * cfg.throttling_percent // 100
    high = high // PAGE * PAGE
    return mem_min, mem_low, max(high, mem_min)


@functools.lru_cache(maxsize=8192)
def _parent(directory: str) -> str:
    """A pod dir's tier dir (os.path.dirname, remembered: the same few hundred pod dirs every second)."""
    return os.path.dirname(directory)


class MemoryQoS(Reconciler):
    name = "MemoryQoS"
    gate = FeatureGate("CgroupReconcile", False, "memory.min/low/high and Anolis memcg QoS per QoS class")
    default_interval_s = 1.0
    acts_on = ("cgroup",)

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        strategy = snap.slo.resource_qos_strategy
        on = [n for n, c in (("LSR", strategy.lsr_class), ("LS", strategy.ls_class), ("BE", strategy.be_class))
              if c.memory_qos.enable]
        if not on:
            return Verdict(False, "NodeSLO resourceQOSStrategy: memoryQOS disabled for every class")
        return Verdict(True, f"memoryQOS enabled for {', '.join(on)}")

    def initial_state(self, now: float) -> Any:
        return MemoryQoSState()

    def plan_disabled(self, snap: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        # Every class disabled: the kernel defaults (0 / 0 / max) where this agent set something.
        st = state if isinstance(state, MemoryQoSState) else MemoryQoSState()
        if not st.wrote:
            return QoSPlan.skip(self.name, why, state=st)
        plan = self._plan(snap, st, why)
        done = plan.skipped or not plan.writes
        return QoSPlan(self.name, f"disabled ({why}); resetting memory QoS", plan.numbers, writes=plan.writes,
                       notes=plan.notes, skipped=plan.skipped,
                       state=MemoryQoSState() if done else MemoryQoSState(MappingProxyType({}), wrote=True))

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        return self._plan(snap, state if isinstance(state, MemoryQoSState) else MemoryQoSState(), "")

    def _plan(self, snap: QoSSnapshot, st: MemoryQoSState, why: str) -> QoSPlan:
        files = snap.kernel.cgroup_files
        if "memory.min" not in files and "memory.low" not in files and "memory.high" not in files:
            return QoSPlan.skip(
                self.name, "memory.min/low/high unsupported on this kernel (cgroup v1 without memcg QoS)",
                state=st,
            )
        strategy = snap.slo.resource_qos_strategy
        allocatable = snap.node.memory_allocatable_bytes if snap.node is not None else 0
        base = {CgroupResource.MEMORY_MIN, CgroupResource.MEMORY_LOW, CgroupResource.MEMORY_HIGH}
        have = {r for r in base if r.value in files}
        anolis = [(r, attr) for r, attr in _ANOLIS if r.value in files]
        tiers: dict[str, list[int]] = {}
        pod_writes: list[CgroupWrite] = []
        cont_writes: list[CgroupWrite] = []
        managed = 0
        high_total = 0  # memory.high of the pods it limits (max left out): what throttlingPercent moves
        slot = int(snap.now) % REFRESH_SLOTS
        kept: dict[str, tuple[Hashable, tuple[int, int, int]]] = {}
        classes: dict[str, ResourceQOS | None] = {}  # for_class once per QoS class a round, not once per pod

        def emit(out: list[CgroupWrite], directory: str, who: str, cfg: MemoryQOS, values: tuple[int, int, int]) -> None:
            label = f"{who}: " + (f"memoryQOS min {cfg.min_limit_percent}% low {cfg.low_limit_percent}% "
                                  f"throttling {cfg.throttling_percent}%" if cfg.enable else f"memoryQOS off{' (' + why + ')' if why else ''}")
            for resource, value in zip((CgroupResource.MEMORY_MIN, CgroupResource.MEMORY_LOW, CgroupResource.MEMORY_HIGH), values):
                if resource in have:
                    out.append(CgroupWrite(directory, resource, value, owner=self.name, reason=label))
            if cfg.enable:
                for resource, attr in anolis:
                    out.append(CgroupWrite(directory, resource, int(getattr(cfg, attr)), owner=self.name, reason=label))

        for pod in snap.pods:
            pk = snap.kernel.pods.get(pod.uid)
            qos = pod.qos or "LS"
            cls = classes[qos] if qos in classes else classes.setdefault(qos, strategy.for_class(qos))
            if pk is None or cls is None or not pod.active or pod.qos == "SYSTEM":
                continue
            cfg = cls.memory_qos
            managed += 1
            signature = (cfg, pk.dir, pk.memory_request_bytes, pk.memory_limit_bytes, allocatable,
                         tuple([(c.dir, c.memory_request_bytes, c.memory_limit_bytes) for c in pk.containers]))
            last = st.pods.get(pod.uid)
            if last is not None and last[0] == signature and zlib.crc32(pod.uid.encode()) % REFRESH_SLOTS != slot:
                values = last[1]  # unchanged since the last round and not its refresh slot: nothing to plan
            else:
                values = memory_values(cfg, pk.memory_request_bytes, pk.memory_limit_bytes, allocatable)
                emit(pod_writes, pk.dir, pod.key, cfg, values)
                for c in pk.containers:
                    cvalues = memory_values(cfg, c.memory_request_bytes, c.memory_limit_bytes, allocatable)
                    emit(cont_writes, c.dir, f"{pod.key}/{c.name}", cfg, cvalues)
            kept[pod.uid] = (signature, values)
            sums = tiers.setdefault(_parent(pk.dir), [0, 0])
            sums[0] += values[0]
            sums[1] += values[1]
            if values[2] >= 0:
                high_total += values[2]
        kubepods = snap.kernel.tiers.get("kubepods", "")
        total = [sum(v[0] for v in tiers.values()), sum(v[1] for v in tiers.values())]
        tier_writes: list[CgroupWrite] = []
        for tier, (tmin, tlow) in sorted(tiers.items()):
            if tier == kubepods or not tier:
                continue
            for resource, value in ((CgroupResource.MEMORY_MIN, tmin), (CgroupResource.MEMORY_LOW, tlow)):
                if resource in have:
                    tier_writes.append(CgroupWrite(tier, resource, value, owner=self.name, reason=f"tier {tier}: sum of its pods"))
        root_writes = [
            CgroupWrite(kubepods, resource, value, owner=self.name, reason="kubepods: sum of every pod")
            for resource, value in ((CgroupResource.MEMORY_MIN, total[0]), (CgroupResource.MEMORY_LOW, total[1]))
            if resource in have and kubepods
        ]
        # The kubelet's QoS dirs (kubepods, burstable, besteffort) are rewritten by the kubelet (with its own
        # MemoryQoS gate on v2, memory.min too), so they are read and compared every round (not cacheable):
        # a rewrite is put right within one interval. Pods and containers are ours: the write cache spares
        # their reads on a quiet node (force-rewritten every `force_update_seconds`). Tiers come first, so a
        # growing protection is raised top-down.
        upper = ResourcePlan(levels=(tuple(root_writes), tuple(tier_writes)), leveled=True, cacheable=False)
        lower = ResourcePlan(levels=(tuple(pod_writes), tuple(cont_writes)), leveled=True, cacheable=True)
        count = len(root_writes) + len(tier_writes) + len(pod_writes) + len(cont_writes)
        summary = f"{managed} pods: memory.min total {total[0]} B, memory.low total {total[1]} B"
        return QoSPlan(self.name, summary, numbers(pods=managed, min_total=total[0], low_total=total[1],
                                                   high_total=high_total, files=count),
                       writes=tuple(p for p in (upper, lower) if any(p.levels)),
                       state=MemoryQoSState(MappingProxyType(kept), wrote=st.wrote or bool(count)))
