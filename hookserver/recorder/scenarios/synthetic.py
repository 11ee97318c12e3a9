"""A synthetic day of a colocated node, recorded by the real QoS runner and the real flight recorder.

`python -m hookserver.recorder.scenarios.synthetic OUT [--pods 200] [--hours 24] [--step 10]` builds a node
(32 CPUs and 128 GiB at 200 pods, in proportion for fewer), 60 % LS pods (koord-prod) whose CPU follows a daily curve (a morning and an evening peak over a
night trough, with six 8-minute bursts) and 40 % BE pods (koord-batch) that soak up what suppress leaves them and whose memory grows through
the day; one container per pod. Each step the runner plans CPU suppress, the evictors, CPU burst and memory
QoS on that snapshot under the recorded NodeSLO (dry run: it writes nothing, its state advances as if it had),
the BE tier takes the cpuset suppress chose, the LS containers the CFS quota and burst CPU burst chose,
pods it evicted leave 30 s later and are replaced 5 minutes after that, and the recorder keeps it all. The
numbers are seeded: the same arguments give the same recording.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from hookserver.predictor.settings import PredictorSettings
from hookserver.slo.document import spec_from_json
from hookserver.store.state import StateStore
from hookserver.system.topology import CpuInfo, NodeTopology, NumaMemInfo

from qos.eviction.cpu import CPUEvict
from qos.cpu.suppress import CPUSuppress
from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
from hookserver.featuregates import GateRegistry
from qos.eviction.memory import MemoryEvict
from qos.framework.plan import QoSPlan
from qos.framework.runner import QoSRunner
from qos.settings import QoSSettings
from hookserver.executor.plan import CgroupResource
from qos.cpu.burst import CPUBurst
from qos.memory_qos import MemoryQoS
from qos.snapshot.kernel import ContainerKernel, KernelFacts, PodKernel
from qos.snapshot.model import BEStats, BETier, ContainerFacts, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.world import tier_after
from hookserver.recorder.writer import FlightRecorder

__all__ = ["DEFAULT_SLO", "SyntheticNode", "generate"]

GiB = 2**30
DAY_S = 86400.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the recording's midnight
# What the recorded agent ran under: suppress at 65 %, BE memory eviction at 80 %, CPU burst (CFS burst and
# quota burst, share pool at 75 %) and memory QoS for LS and BE pods.
DEFAULT_SLO = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 65,
                                               "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 80},
               "cpuBurstStrategy": {"policy": "auto", "cpuBurstPercent": 200, "cfsQuotaBurstPercent": 300,
                                    "sharePoolThresholdPercent": 75},
               "resourceQOSStrategy": {
                   "lsClass": {"memoryQOS": {"enable": True, "minLimitPercent": 50, "lowLimitPercent": 80,
                                             "throttlingPercent": 90}},
                   "beClass": {"memoryQOS": {"enable": True, "minLimitPercent": 0, "lowLimitPercent": 0,
                                             "throttlingPercent": 80}}}}
DEFAULT_COLOCATION = {"enable": True, "cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 70,
                      "metricAggregateDurationSeconds": 300, "metricReportIntervalSeconds": 60}
GATES = {"BECPUSuppress": True, "BEMemoryEvict": True, "BECPUEvict": False, "CPUBurst": True, "CgroupReconcile": True}
# The node's cgroup v1 layout and the optional files its kernel offers (CFS burst, memcg QoS).
TIERS = {"kubepods": "kubepods", "burstable": "kubepods/burstable", "besteffort": "kubepods/besteffort"}
CGROUP_FILES = frozenset({"cpu.cfs_burst_us", "memory.min", "memory.low", "memory.high"})
THROTTLED_AT = 0.5  # a container using more than this share of its quota reports throttling


def daily_curve(t: float) -> float:
    """0..1 over a day: a night trough, a morning peak near 10:00 and a higher evening peak near 20:00."""
    h = (t % DAY_S) / 3600.0
    morning = math.exp(-((h - 10.0) ** 2) / 6.0)
    evening = 1.15 * math.exp(-((h - 20.0) ** 2) / 5.0)
    return min(0.15 + 0.7 * max(morning, evening) + 0.15 * math.sin(h / 24 * math.pi), 1.0)


# Traffic bursts (hour of day): LS CPU ×1.6 for 8 minutes, the steps a predictor learns only afterwards.
BURSTS_H = (2.5, 7.5, 11.2, 15.7, 19.4, 22.1)
BURST_S = 480.0


def burst(t: float) -> float:
    s = t % DAY_S
    return 1.6 if any(0 <= s - h * 3600 < BURST_S for h in BURSTS_H) else 1.0


@dataclass
class _Pod:
    facts: PodFacts
    base_cpu: float  # cores at the daily peak (LS) or demand (BE)
    base_mem: float
    born: float
    gone_at: float | None = None


def _pod(i: int, *, be: bool, rng: random.Random, born: float, generation: int = 0) -> _Pod:
    name = f"{'batch' if be else 'web'}-{i:03d}" + (f"-r{generation}" if generation else "")
    uid = f"{'be' if be else 'ls'}-{i:03d}-{generation:03d}-0000"
    if be:
        req_cpu_milli = rng.choice((500, 1000, 2000))
        req_mem = rng.choice((512, 1024, 2048)) * 2**20
        labels = {"koordinator.sh/qosClass": "BE", "koordinator.sh/priority-class": "koord-batch"}
        requests = {"kubernetes.io/batch-cpu": req_cpu_milli, "kubernetes.io/batch-memory": req_mem}
        containers = (ContainerFacts(f"c-{uid}", "main", requests={"kubernetes.io/batch-cpu": str(req_cpu_milli),
                                                                   "kubernetes.io/batch-memory": str(req_mem)}),)
        facts = PodFacts(uid=uid, namespace="batch", name=name, qos="BE", qos_label="BE", priority=5500,
                         priority_class="koord-batch", phase="Running", labels=MappingProxyType(labels),
                         batch_cpu_request_milli=req_cpu_milli, requests=MappingProxyType(requests),
                         containers=containers, cgroup_dirs=(f"kubepods/besteffort/pod{uid}",))
        return _Pod(facts, req_cpu_milli / 1000 * rng.uniform(0.8, 1.6), req_mem * rng.uniform(0.3, 0.5), born)
    req_cpu_milli = rng.choice((100, 250, 500))
    req_mem = rng.choice((256, 512, 1024)) * 2**20
    labels = {"koordinator.sh/qosClass": "LS", "koordinator.sh/priority-class": "koord-prod"}
    containers = (ContainerFacts(f"c-{uid}", "main", requests={"cpu": f"{req_cpu_milli}m", "memory": str(req_mem)},
                                 limits={"cpu": f"{2 * req_cpu_milli}m", "memory": str(2 * req_mem)}),)
    facts = PodFacts(uid=uid, namespace="web", name=name, qos="LS", qos_label="LS", priority=9500,
                     priority_class="koord-prod", phase="Running", labels=MappingProxyType(labels),
                     cpu_request_milli=req_cpu_milli, requests=MappingProxyType({"cpu": req_cpu_milli, "memory": req_mem}),
                     containers=containers, cgroup_dirs=(f"kubepods/burstable/pod{uid}",))
    return _Pod(facts, req_cpu_milli / 1000 * rng.uniform(0.35, 0.9), req_mem * rng.uniform(0.4, 0.7), born)


class SyntheticNode:
    """The node's world: pods, their usage at time t, the BE tier, and the snapshot source the runner reads."""

    def __init__(self, *, pods: int = 200, seed: int = 7, start: float = START,
                 spikes: Sequence[tuple[float, float, float]] | None = None) -> None:
        self.rng = random.Random(seed)
        # (seconds after the start, how long, LS CPU factor); None: the daily bursts (BURSTS_H)
        self.spikes = None if spikes is None else tuple((start + at, start + at + length, factor)
                                                        for at, length, factor in spikes)
        self.now = start
        n_be = pods * 2 // 5
        self.pods: list[_Pod] = [_pod(i, be=False, rng=self.rng, born=start - 3 * DAY_S) for i in range(pods - n_be)]
        self.pods += [_pod(i, be=True, rng=self.rng, born=start - 3 * DAY_S) for i in range(n_be)]
        self.generation = 0
        self.replace_at: list[tuple[float, int]] = []
        # 32 CPUs and 128 GiB for 200 pods; a smaller node for fewer (tests)
        self.cpus = cpus = max(8, 2 * round(16 * pods / 200))
        self.memory = memory = int(128 * GiB * pods / 200)
        self.topology = NodeTopology(
            cpus=tuple(CpuInfo(cpu=c, core=c % (cpus // 2), socket=0, numa_node=0, l3=0, online=True)
                       for c in range(cpus)),
            numa=(NumaMemInfo(0, memory, memory // 2),))
        self.node = NodeFacts(name="node-synthetic", cpu_capacity_milli=cpus * 1000, memory_capacity_bytes=memory,
                              cpu_allocatable_milli=cpus * 1000 - 1000, memory_allocatable_bytes=memory - 4 * GiB,
                              reserved_cpu_milli=1000)
        self.be_cpuset: frozenset[int] = frozenset(range(cpus))
        self.be_quota_us = -1  # the tier's cfs quota (the cfsQuota policy), -1 unlimited
        # CFS files CPU burst wrote (cgroup dir -> µs); a dir not here holds the kubelet's value
        self.cfs_quota: dict[str, int] = {}
        self.cfs_burst: dict[str, int] = {}
        self.slo = spec_from_json(DEFAULT_SLO, origin="synthetic").spec

    def created_at(self, uid: str) -> float:
        for p in self.pods:
            if p.facts.uid == uid:
                return p.born
        return 0.0

    def build(self, *, evicted: frozenset[str] = frozenset()) -> QoSSnapshot:
        t = self.now
        shape = daily_curve(t)
        spike = burst(t) if self.spikes is None else next(
            (factor for lo, hi, factor in self.spikes if lo <= t < hi), 1.0)
        rng = self.rng
        pods: list[PodFacts] = []
        ls_total = 0.0
        mem_total = 6 * GiB * self.memory / (128 * GiB)  # the system's own
        be_pods = [p for p in self.pods if p.facts.is_be]
        for p in self.pods:
            if p.facts.is_be:
                continue
            cpu = p.base_cpu * (0.25 + 0.75 * shape) * spike * rng.uniform(0.85, 1.2)
            mem = p.base_mem * (0.85 + 0.15 * shape)
            ls_total += cpu
            mem_total += mem
            pods.append(replace(p.facts, cpu_usage_cores=cpu, memory_usage_bytes=mem,
                                terminating=p.gone_at is not None))
        system = (0.6 + 0.4 * shape) * self.cpus / 32
        # BE soaks up what the suppress cpuset leaves, shared in proportion to demand
        allowed = len(self.be_cpuset) if self.be_quota_us < 0 else min(len(self.be_cpuset), self.be_quota_us / 100_000)
        be_room = max(min(allowed, self.cpus - ls_total - system) * 0.95, 0.0)
        demand = sum(p.base_cpu for p in be_pods) or 1.0
        share = min(be_room / demand, 1.0)
        be_total = 0.0
        for p in be_pods:
            cpu = p.base_cpu * share * rng.uniform(0.9, 1.0)
            age_h = (t - max(p.born, t - DAY_S)) / 3600.0
            mem = p.base_mem * (1.0 + 0.01 * (t - START) / 3600.0) + 0.012 * GiB * age_h * rng.uniform(0.9, 1.1)
            be_total += cpu
            mem_total += mem
            pods.append(replace(p.facts, cpu_usage_cores=cpu, memory_usage_bytes=mem, terminating=p.gone_at is not None))
        node_cpu = ls_total + be_total + system
        kernel = self._kernel(pods)
        be = BEStats(window_s=60.0, avg_usage_milli=be_total * 1000, avg_request_milli=sum(p.facts.batch_cpu_request_milli for p in be_pods),
                     avg_limit_milli=len(self.be_cpuset) * 1000.0, count=6, last_usage_milli=be_total * 1000,
                     last_request_milli=float(sum(p.facts.batch_cpu_request_milli for p in be_pods)),
                     last_limit_milli=len(self.be_cpuset) * 1000.0)
        return QoSSnapshot(
            now=t, slo=self.slo, node=self.node, pods=tuple(pods),
            usage=NodeUsage(cpu_cores=node_cpu, cpu_cores_avg=node_cpu, cpu_avg_count=6, cpu_window_s=60.0,
                            memory_bytes=min(mem_total, self.memory * 0.99), memory_total_bytes=float(self.memory),
                            system_cpu_cores=system),
            be=be, be_tier=BETier(dir="kubepods/besteffort", cpuset=self.be_cpuset, quota_us=self.be_quota_us,
                                  cpuset_levels=(("kubepods/besteffort",),)),
            topology=self.topology, collect_interval_s=1.0, kernel=kernel,
        )

    def _kernel(self, pods: Sequence[PodFacts]) -> KernelFacts:
        """One container per pod, using what its pod uses; LS containers limited at their spec's CPU limit, their
        CFS quota and burst as CPU burst last wrote them."""
        out: dict[str, PodKernel] = {}
        for pod in pods:
            if pod.terminating:
                continue
            spec = pod.containers[0]
            pdir = pod.cgroup_dirs[0]
            cdir = f"{pdir}/{spec.id}"
            limit = int(spec.limits.get("cpu", "0m").rstrip("m")) if "cpu" in spec.limits else 0
            base = limit * 100 if limit else -1
            quota = self.cfs_quota.get(cdir, base)
            cpu = pod.cpu_usage_cores or 0.0
            throttled = (0.2 if quota > 0 and cpu > THROTTLED_AT * quota / 100_000 else 0.0) if limit else None
            mem_req = int(spec.requests.get("memory", spec.requests.get("kubernetes.io/batch-memory", "0")))
            mem_lim = int(spec.limits.get("memory", "0"))
            container = ContainerKernel(
                id=spec.id, name=spec.name, dir=cdir, cpu_limit_milli=limit, memory_request_bytes=mem_req,
                memory_limit_bytes=mem_lim, quota_us=quota, burst_us=self.cfs_burst.get(cdir, 0),
                throttled_ratio=throttled, cpu_usage_cores=pod.cpu_usage_cores, memory_usage_bytes=pod.memory_usage_bytes)
            out[pod.uid] = PodKernel(uid=pod.uid, dir=pdir, containers=(container,),
                                     quota_us=self.cfs_quota.get(pdir, base), cpu_limit_milli=limit,
                                     memory_request_bytes=mem_req, memory_limit_bytes=mem_lim)
        return KernelFacts(read=frozenset({"pods"}), tiers=MappingProxyType(TIERS), cgroup_files=CGROUP_FILES,
                           pods=MappingProxyType(out))

    def after_round(self, snap: QoSSnapshot, plans: Sequence[object], evicted: Sequence[str]) -> None:
        """What the executor and the apiserver would have done: the tier takes suppress's cpuset or quota (and
        the quota goes back to unlimited under the cpuset policy or with suppress off); evicted pods leave 30 s
        later and come back as new pods 5 minutes after that."""
        tier = BETier(dir="kubepods/besteffort", cpuset=self.be_cpuset, quota_us=self.be_quota_us)
        for plan in plans:
            if isinstance(plan, QoSPlan) and plan.reconciler == CPUSuppress.name:
                tier = tier_after(tier, plan)
            if isinstance(plan, QoSPlan) and plan.reconciler == CPUBurst.name:
                for write in (w for rp in plan.writes for level in rp.levels for w in level):
                    if write.resource == CgroupResource.CPU_CFS_QUOTA:
                        self.cfs_quota[write.cgroup_dir] = int(write.value)
                    elif write.resource == CgroupResource.CPU_CFS_BURST:
                        self.cfs_burst[write.cgroup_dir] = int(write.value)
        self.be_cpuset = tier.cpuset or self.be_cpuset
        self.be_quota_us = -1 if tier.quota_us is None else tier.quota_us
        for p in self.pods:
            if p.facts.uid in evicted and p.gone_at is None:
                p.gone_at = snap.now + 30.0
        keep = []
        for i, p in enumerate(self.pods):
            if p.gone_at is not None and snap.now >= p.gone_at:
                self.generation += 1
                self.replace_at.append((snap.now + 300.0, self.generation))
                continue
            keep.append(p)
        self.pods = keep
        due = [g for at, g in self.replace_at if at <= snap.now]
        self.replace_at = [(at, g) for at, g in self.replace_at if at > snap.now]
        for g in due:
            self.pods.append(_pod(1000 + g, be=True, rng=self.rng, born=snap.now, generation=g))


def generate(out: str, *, pods: int = 200, hours: float = 24.0, step_s: float = 10.0, seed: int = 7,
             slo: dict[str, object] | None = None, start_hour: float = 0.0, round_s: float | None = None,
             colocation: dict[str, object] | None = None,
             spikes: Sequence[tuple[float, float, float]] | None = None,
             evict_delay_s: float = 0.0) -> FlightRecorder:
    """Write a synthetic recording to `out` (replaced) and return the closed recorder (its counters).

    `step_s` is the recorder's interval (a frame every step); `round_s` the agent's round (default `step_s`):
    the real agent plans every second and records every 10 s, the case a replay must reproduce exactly.
    `spikes`: (seconds after the start, duration, LS CPU factor) in place of the daily bursts.
    `evict_delay_s`: how long after its round the audit stamps each eviction (it stamps one when it is done,
    and a SIGKILL eviction waits for the cgroup's freeze, a second and more on a real node)."""
    round_s = step_s if round_s is None else round_s
    colocation_body = dict(DEFAULT_COLOCATION if colocation is None else colocation)
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(out + suffix):
            os.unlink(out + suffix)
    world = SyntheticNode(pods=pods, seed=seed, start=START + start_hour * 3600, spikes=spikes)
    if slo is not None:
        world.slo = spec_from_json(slo, origin="synthetic").spec
    clock = [world.now]
    reconcilers = [CPUSuppress(interval_s=round_s), MemoryEvict(interval_s=round_s), CPUEvict(interval_s=round_s),
                   CPUBurst(interval_s=round_s), MemoryQoS(interval_s=round_s)]
    gates = GateRegistry(g for r in reconcilers for g in r.gates).resolve([("synthetic", GATES)])
    store = StateStore(clock=lambda: clock[0])
    recorder = FlightRecorder(
        out, RecorderSettings(interval_s=step_s, retention_s=hours * 3600 + 3600, max_mib=200),
        node_name=world.node.name, created_at=world.created_at, colocation=lambda: colocation_body,
        predictor=PredictorSettings(cold_start_duration_s=3600.0).model_dump(mode="json"),
        evictions=lambda since: [replace(e, ts=e.ts + evict_delay_s) for e in store.audit.evictions(since=since)],
        started_at=world.now,
        reconcilers={r.name: {"interval_s": r.interval_s, "cooldown_s": r.cooldown_s} for r in reconcilers},
    )
    runner = QoSRunner(reconcilers, gates=gates, snapshots=world, store=store, executor=None,
                       evictions=EvictionGuard(ReportOnlyBackend(), cooldown_s=60, clock=lambda: clock[0]),
                       settings=QoSSettings(dry_run=True), clock=lambda: clock[0], mono=lambda: clock[0],
                       evict_in_background=False, recorder=recorder)
    end = world.now + hours * 3600
    seen = 0.0
    while world.now < end:
        plans = runner.round()
        fresh = [e.pod_uid for e in store.audit.evictions(since=seen) if e.ts >= seen]
        seen = clock[0] + 1e-6
        world.after_round(world.build(), plans, fresh)
        world.now += round_s
        clock[0] = world.now
    recorder.close()
    return recorder


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hookserver.recorder.scenarios.synthetic", description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--pods", type=int, default=200)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--step", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rec = generate(args.out, pods=args.pods, hours=args.hours, step_s=args.step, seed=args.seed)
    print(f"{args.out}: {rec.frames} frames, {os.path.getsize(args.out) / 2**20:.1f} MiB, "
          f"{rec.write_s / max(rec.frames, 1) * 1000:.2f} ms a frame")
    return 0


if __name__ == "__main__":
    sys.exit(main())
