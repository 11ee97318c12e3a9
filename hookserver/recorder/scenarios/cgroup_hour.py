"""A real recording: this machine, real processes in real cgroup v1 groups, the real QoS runner and recorder.

`python -m hookserver.recorder.scenarios.cgroup_hour OUT [--minutes 60]` (root, cgroup v1) makes its own subtree
`/sys/fs/cgroup/{cpu,cpuacct,memory}/hookserver-replay-<pid>/` and calls it the node: 1 CPU (a CFS quota on the
subtree) and 1 GiB. In it an LS pod (`ls-web`) burns CPU on a daily curve compressed into the run (a morning and
an evening peak) and two BE pods (`be/batch-N`) burn whatever they can get, their memory growing. Every second
it samples the groups' cpuacct and memory files; every 10 s it builds the snapshot the agent's planners read
and runs CPU suppress (cfsQuota policy) and the memory evictor through the real runner. Their decisions are
carried out for real on the subtree: the BE group's `cpu.cfs_quota_us` takes suppress's quota, and a BE pod
the evictor picks is killed (SIGKILL, as `--evict-standalone=kill`) and started again, as a new pod, a minute
later. Everything is removed afterwards (processes killed, groups deleted), also on Ctrl-C.

The processes run at nice 19 and the subtree never uses more than one CPU, so others sharing the machine keep
the rest.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from qos.framework.runner import QoSRunner
from qos.settings import QoSSettings
from qos.snapshot.model import BEStats, BETier, ContainerFacts, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

from hookserver.recorder.scenarios.synthetic import daily_curve
from hookserver.recorder.settings import RecorderSettings
from hookserver.recorder.writer import FlightRecorder

__all__ = ["SLO", "main", "record"]

CGROUP_ROOT = "/sys/fs/cgroup"
SUBSYSTEMS = ("cpu", "cpuacct", "memory")
NODE_MILLI = 1000
NODE_MEMORY = 1 << 30
SLO = {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota",
                                       "cpuSuppressThresholdPercent": 65, "memoryEvictThresholdPercent": 60}}
COLOCATION = {"enable": True, "cpuReclaimThresholdPercent": 65, "memoryReclaimThresholdPercent": 70,
              "metricAggregateDurationSeconds": 300, "metricReportIntervalSeconds": 60}
GATES = {"BECPUSuppress": True, "BEMemoryEvict": True, "BECPUEvict": False}

# A pod's process: busy for `duty` of every 100 ms (LS: the daily curve, compressed; BE: always), memory held.
_WORKER = r"""
import math, os, sys, time
role, start, span, mem_mb, grow_mb = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
spike_lo, spike_hi = float(sys.argv[6]), float(sys.argv[7])  # LS busy all the time in between
os.nice(19)
sys.stdout.write("ready\n"); sys.stdout.flush(); sys.stdin.readline()  # wait until placed in the groups
hold = [bytearray(mem_mb << 20)]
for b in hold: b[::4096] = b"x" * len(b[::4096])
def curve(t):
    h = ((t - start) / span * 24.0) % 24.0
    m = math.exp(-((h - 10.0) ** 2) / 6.0); e = 1.15 * math.exp(-((h - 20.0) ** 2) / 5.0)
    return min(0.15 + 0.7 * max(m, e) + 0.15 * math.sin(h / 24 * math.pi), 1.0)
last_grow = time.time()
while True:
    now = time.time()
    duty = 1.0 if role == "be" or spike_lo <= now < spike_hi else 0.05 + 0.55 * curve(now)
    end = now + 0.1 * duty
    while time.time() < end:
        pass
    time.sleep(max(0.1 * (1 - duty), 0.0))
    if grow_mb and now - last_grow > 10:
        last_grow = now
        block = bytearray(grow_mb << 20); block[::4096] = b"x" * len(block[::4096]); hold.append(block)
"""


@dataclass
class _Pod:
    name: str
    uid: str
    group: str  # relative to the subtree
    be: bool
    proc: subprocess.Popen[str] | None = None
    last_ns: int = 0
    cpu: float = 0.0
    memory: float = 0.0
    gone_at: float | None = None


@dataclass
class _Subtree:
    name: str
    made: list[str] = field(default_factory=list)

    def path(self, subsystem: str, group: str = "") -> str:
        return os.path.join(CGROUP_ROOT, subsystem, self.name, group)

    def make(self, group: str = "") -> None:
        for s in SUBSYSTEMS:
            p = self.path(s, group)
            os.makedirs(p, exist_ok=True)
            self.made.append(p)

    def write(self, subsystem: str, group: str, file: str, value: object) -> None:
        with open(os.path.join(self.path(subsystem, group), file), "w") as fh:
            fh.write(str(value))

    def read(self, subsystem: str, group: str, file: str) -> str:
        with open(os.path.join(self.path(subsystem, group), file)) as fh:
            return fh.read()

    def join(self, pid: int, group: str) -> None:
        for s in SUBSYSTEMS:
            self.write(s, group, "cgroup.procs", pid)

    def remove(self) -> None:
        for p in sorted(set(self.made), key=len, reverse=True):
            for _ in range(50):
                try:
                    os.rmdir(p)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)  # tasks still leaving


def _memory_of(tree: _Subtree, group: str) -> float:
    """usage - inactive file (koordlet's usageWithoutPageCache, roughly) of a v1 memory group."""
    usage = int(tree.read("memory", group, "memory.usage_in_bytes"))
    stat = dict(line.split() for line in tree.read("memory", group, "memory.stat").splitlines())
    return float(max(usage - int(stat.get("total_inactive_file", 0)), 0))


class _World:
    def __init__(self, tree: _Subtree, start: float, span_s: float, spike: tuple[float, float] = (0.0, 0.0)) -> None:
        self.tree = tree
        self.spike = spike  # (from, to) in seconds since the epoch: the LS pod burns a whole CPU
        self.start = start
        self.span = span_s
        self.generation = 0
        self.pods: list[_Pod] = []
        self.now = time.time()
        self.node_last_ns = 0
        self.node_cpu = 0.0
        self.node_window: deque[tuple[float, float]] = deque()
        self.be_window: deque[tuple[float, float]] = deque()
        self.restart_at: list[float] = []
        self.slo = spec_from_json(SLO, origin="cgroup-hour").spec
        self.topology = NodeTopology(cpus=tuple(CpuInfo(c, c, 0, 0, 0, True) for c in range(os.cpu_count() or 2)),
                                     numa=(NumaMemInfo(0, NODE_MEMORY, NODE_MEMORY // 2),))
        self.node = NodeFacts(name=f"{os.uname().nodename}-replay", cpu_capacity_milli=NODE_MILLI,
                              memory_capacity_bytes=NODE_MEMORY, cpu_allocatable_milli=NODE_MILLI,
                              memory_allocatable_bytes=NODE_MEMORY)

    def spawn(self, name: str, group: str, *, be: bool, mem_mb: int, grow_mb: int) -> _Pod:
        self.tree.make(group)
        uid = f"{name}-{self.generation:03d}-{os.getpid()}"
        proc = subprocess.Popen([sys.executable, "-c", _WORKER, "be" if be else "ls", repr(self.start), repr(self.span),
                                 str(mem_mb), str(grow_mb), repr(self.spike[0]), repr(self.spike[1])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.readline()
        self.tree.join(proc.pid, group)
        proc.stdin.write("go\n")
        proc.stdin.flush()
        pod = _Pod(name, uid, group, be, proc, last_ns=int(self.tree.read("cpuacct", group, "cpuacct.usage")))
        self.pods.append(pod)
        return pod

    def sample(self) -> None:
        """Once a second: each pod's CPU (cores over the last second) and memory, and the subtree's."""
        now = time.time()
        dt = max(now - self.now, 1e-3)
        self.now = now
        for p in self.pods:
            if p.gone_at is not None:
                continue
            ns = int(self.tree.read("cpuacct", p.group, "cpuacct.usage"))
            p.cpu, p.last_ns = (ns - p.last_ns) / 1e9 / dt, ns
            p.memory = _memory_of(self.tree, p.group)
        ns = int(self.tree.read("cpuacct", "", "cpuacct.usage"))
        self.node_cpu, self.node_last_ns = (ns - self.node_last_ns) / 1e9 / dt if self.node_last_ns else 0.0, ns
        self.node_window.append((now, self.node_cpu))
        self.be_window.append((now, sum(p.cpu for p in self.pods if p.be and p.gone_at is None)))
        for w in (self.node_window, self.be_window):
            while w and w[0][0] < now - 60:
                w.popleft()

    def facts(self, p: _Pod) -> PodFacts:
        labels = {"koordinator.sh/qosClass": "BE" if p.be else "LS",
                  "koordinator.sh/priority-class": "koord-batch" if p.be else "koord-prod"}
        if p.be:
            requests = {"kubernetes.io/batch-cpu": 500, "kubernetes.io/batch-memory": 128 << 20}
            containers = (ContainerFacts(f"c-{p.uid}", "main", requests={k: str(v) for k, v in requests.items()}),)
            return PodFacts(uid=p.uid, namespace="batch", name=p.name, qos="BE", qos_label="BE", priority=5500,
                            priority_class="koord-batch", phase="Running", terminating=p.gone_at is not None,
                            labels=MappingProxyType(labels), cpu_usage_cores=p.cpu, memory_usage_bytes=p.memory,
                            batch_cpu_request_milli=500, requests=MappingProxyType(requests), containers=containers,
                            cgroup_dirs=(f"{self.tree.name}/{p.group}",))
        containers = (ContainerFacts(f"c-{p.uid}", "main", requests={"cpu": "500m", "memory": "256Mi"},
                                     limits={"cpu": "1", "memory": "512Mi"}),)
        return PodFacts(uid=p.uid, namespace="web", name=p.name, qos="LS", qos_label="LS", priority=9500,
                        priority_class="koord-prod", phase="Running", labels=MappingProxyType(labels),
                        cpu_usage_cores=p.cpu, memory_usage_bytes=p.memory, cpu_request_milli=500,
                        requests=MappingProxyType({"cpu": 500, "memory": 256 << 20}), containers=containers,
                        cgroup_dirs=(f"{self.tree.name}/{p.group}",))

    def build(self, *, evicted: frozenset[str] = frozenset()) -> QoSSnapshot:
        pods = tuple(self.facts(p) for p in self.pods)
        node_mem = _memory_of(self.tree, "")
        avg = sum(v for _, v in self.node_window) / max(len(self.node_window), 1)
        be_avg = sum(v for _, v in self.be_window) / max(len(self.be_window), 1)
        quota = int(self.tree.read("cpu", "be", "cpu.cfs_quota_us"))
        limit = NODE_MILLI if quota == -1 else min(quota / 100, NODE_MILLI)
        be_req = float(sum(500 for p in self.pods if p.be and p.gone_at is None))
        return QoSSnapshot(
            now=self.now, slo=self.slo, node=self.node, pods=pods,
            usage=NodeUsage(cpu_cores=self.node_cpu, cpu_cores_avg=avg, cpu_avg_count=len(self.node_window),
                            cpu_window_s=60.0, memory_bytes=node_mem, memory_total_bytes=float(NODE_MEMORY),
                            system_cpu_cores=0.0),
            be=BEStats(window_s=60.0, avg_usage_milli=be_avg * 1000, avg_request_milli=be_req, avg_limit_milli=limit,
                       count=len(self.be_window), last_usage_milli=be_avg * 1000, last_request_milli=be_req,
                       last_limit_milli=limit),
            be_tier=BETier(dir=f"{self.tree.name}/be", cpuset=frozenset(c.cpu for c in self.topology.cpus),
                           quota_us=quota, cpuset_levels=((f"{self.tree.name}/be",),)),
            topology=self.topology, collect_interval_s=1.0,
        )


def record(out: str, *, minutes: float = 60.0, step_s: float = 10.0, round_s: float | None = None,
           spike: tuple[float, float] | None = None) -> FlightRecorder:
    """Record for `minutes`: a frame every `step_s`, the planners every `round_s` (default `step_s`; the agent's
    own cadence is 1 s), and the LS pod burning a whole CPU for `spike` = (minutes in, seconds long)."""
    round_s = step_s if round_s is None else round_s
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(out + suffix):
            os.unlink(out + suffix)
    tree = _Subtree(f"hookserver-replay-{os.getpid()}")
    span = minutes * 60
    started = time.time()
    world = _World(tree, started, span, (0.0, 0.0) if spike is None else
                   (started + spike[0] * 60, started + spike[0] * 60 + spike[1]))
    store = StateStore(clock=time.time)
    reconcilers = [CPUSuppress(interval_s=round_s), MemoryEvict(interval_s=round_s), CPUEvict(interval_s=round_s)]
    gates = GateRegistry(g for r in reconcilers for g in r.gates).resolve([("cgroup-hour", GATES)])
    recorder = FlightRecorder(
        out, RecorderSettings(interval_s=step_s), node_name=world.node.name,
        created_at=lambda uid: world.start - 86400.0, colocation=lambda: COLOCATION,
        predictor=PredictorSettings(cold_start_duration_s=600.0).model_dump(mode="json"),
        evictions=lambda since: store.audit.evictions(since=since), started_at=world.start,
        reconcilers={r.name: {"interval_s": r.interval_s, "cooldown_s": r.cooldown_s} for r in reconcilers},
    )
    runner = QoSRunner(reconcilers, gates=gates, snapshots=world, store=store, executor=None,
                       evictions=EvictionGuard(ReportOnlyBackend(), cooldown_s=60), settings=QoSSettings(dry_run=True),
                       evict_in_background=False, recorder=recorder)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        tree.make()
        tree.write("cpu", "", "cpu.cfs_period_us", 100_000)
        tree.write("cpu", "", "cpu.cfs_quota_us", NODE_MILLI * 100)
        tree.write("memory", "", "memory.limit_in_bytes", NODE_MEMORY)
        tree.make("be")
        world.spawn("web-0", "ls-web", be=False, mem_mb=220, grow_mb=0)
        for i in range(2):
            world.spawn(f"batch-{i}", f"be/batch-{i}", be=True, mem_mb=120, grow_mb=2)
        seen = 0.0
        next_round = time.time() + round_s
        end = world.start + span
        while time.time() < end and not stop:
            time.sleep(max(0.0, 1.0 - (time.time() - world.now)))
            world.sample()
            if time.time() < next_round:
                continue
            next_round += round_s
            plans = runner.round()
            for plan in plans:  # carry suppress's quota out for real
                quota = plan.numbers.get("quota_us")
                if plan.reconciler == CPUSuppress.name and isinstance(quota, int):
                    tree.write("cpu", "be", "cpu.cfs_quota_us", quota)
            for e in store.audit.evictions(since=seen):
                seen = max(seen, e.ts + 1e-6)
                for p in world.pods:
                    if p.uid == e.pod_uid and p.gone_at is None and p.proc is not None:
                        p.proc.kill()
                        p.gone_at = world.now
                        world.restart_at.append(world.now + 60)
            world.pods = [p for p in world.pods if p.gone_at is None or world.now - p.gone_at < 30]
            due = [t for t in world.restart_at if t <= world.now]
            world.restart_at = [t for t in world.restart_at if t > world.now]
            for _ in due:
                world.generation += 1
                world.spawn(f"batch-r{world.generation}", f"be/batch-r{world.generation}", be=True, mem_mb=120, grow_mb=2)
    finally:
        for p in world.pods:
            if p.proc is not None and p.proc.poll() is None:
                p.proc.kill()
                p.proc.wait()
        recorder.close()
        tree.remove()
    return recorder


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hookserver.recorder.scenarios.cgroup_hour",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--round", type=float, default=None, help="plan every this many seconds (default: every frame)")
    ap.add_argument("--spike-at", type=float, default=None, help="minutes in: the LS pod burns a whole CPU")
    ap.add_argument("--spike-for", type=float, default=90.0, help="seconds the spike lasts")
    args = ap.parse_args(argv)
    if not os.path.isdir(os.path.join(CGROUP_ROOT, "cpuacct")) or os.geteuid() != 0:
        print("needs root and cgroup v1 (cpu, cpuacct, memory) under /sys/fs/cgroup", file=sys.stderr)
        return 2
    rec = record(args.out, minutes=args.minutes, round_s=args.round,
                 spike=None if args.spike_at is None else (args.spike_at, args.spike_for))
    print(f"{args.out}: {rec.frames} frames, {os.path.getsize(args.out) / 2**20:.2f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
