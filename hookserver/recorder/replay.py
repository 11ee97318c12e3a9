"""Replay a recording through the real planners, the real predictor and the real batch capacity formula.

`replay(recording, config)` walks the frames in order and, on each, runs what the agent runs:

* CPU suppress, the memory evictor and the CPU evictor (`qos`): `plan` or `plan_disabled` as the runner would
  (feature gates, then the NodeSLO), their state carried from frame to frame through `commit` as if every
  eviction went through;
* CPU burst and memory QoS on the recorded containers (format 2), each from the state the agent's round
  started from (`states.py`) while the run follows the recording (`kernel_world.py`);
* the predictor (`hookserver.predictor`): a training round every `training_interval_s` on the p90 of the
  frames in that interval, the decaying histograms, and `compute_reclaimable` (pod- and priority-based peaks);
* the batch and mid capacity formula (`hookserver.capacity.formula`) every `metricReportIntervalSeconds` on
  usage averaged over `metricAggregateDurationSeconds`, with the predictor's prod-reclaimable figure.

Nothing touches a node. The run "as recorded" reads the BE tier's cpuset and quota the agent found on each
frame, so its plans are the agent's (`mismatches` lists any that are not). A run under a proposal lays the
proposal's fields over the config recorded at each frame (`proposal.py`) and runs on `world.ProposedWorld`:
the recorded node while the proposal writes and evicts what the agent did (so a null proposal reproduces the
recording exactly), its own BE tier and evictions from the first frame it does not, with the agent's
suppress rounds between two frames replayed at the agent's cadence; CPU burst's CFS files likewise, file by
file (`kernel_world.py`); and the CPU evictors' averages over the proposal's window where it changes
`cpuEvictTimeWindowSeconds` (`cpu_window.py`). Each such frame is marked in `diverged` with what the replay
assumed there."""

from __future__ import annotations

import math
import os
import sqlite3
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hookserver.capacity.formula import compute_capacity
from hookserver.capacity.inputs import NodeFacts as CapacityNode
from hookserver.capacity.inputs import PodInput, UsageFacts, WindowedUsage
from hookserver.capacity.quantities import Pair
from hookserver.errors import InputError
from hookserver.koord_resources import BATCH_CPU, BATCH_MEMORY
from hookserver.podclass import KNOWN_PRIORITY_CLASSES, NodeAllocatable, effective_requests, pod_priority_class
from hookserver.predictor.models import NODE_UID, SYSTEM_UID, ModelTable, priority_uid
from hookserver.predictor.predictors import compute_reclaimable, reclaimable_for_prod
from hookserver.predictor.settings import PredictorSettings
from hookserver.predictor.training import p90
from hookserver.slo.colocation import ColocationStrategy
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.records import PodRecord

from qos.cpu.burst import CPUBurst
from qos.eviction.cpu import CPUEvict
from qos.cpu.suppress import CPUSuppress
from qos.memory_qos import MemoryQoS
from qos.eviction.memory import MemoryEvict
from qos.framework.plan import QoSPlan
from qos.framework.reconciler import Reconciler, RoundOutcome
from qos.snapshot.model import PodFacts, QoSSnapshot

from hookserver.recorder.cpu_window import EvictWindow
from hookserver.recorder.decisions import Decision, comparable, decision_of, would_evict
from hookserver.recorder.kernel_world import Files, ProposedContainers, ls_cfs_cores
from hookserver.recorder.proposal import FrameOverlay, Proposal
from hookserver.recorder.reader import Frame, Recording
from hookserver.recorder.schema import explain_sqlite_error
from hookserver.recorder.states import KEPT, restore_state
from hookserver.recorder.world import Divergence, ProposedWorld

__all__ = ["REPLAYED_GATES", "ReplayConfig", "ReplayRun", "replay", "replay_file", "replay_many"]

_CFS_PERIOD_US = 100_000
_REPLAYED = (CPUSuppress, MemoryEvict, CPUEvict, CPUBurst, MemoryQoS)
# The gates of the reconcilers replayed: what `--gate` may name besides the rest of koordlet's catalog.
REPLAYED_GATES = tuple(g for cls in _REPLAYED for g in cls.gates)


@dataclass(frozen=True)
class ReplayConfig:
    """One configuration to replay under: the proposal's fields over what the recording says was in force.
    `as_recorded`: read the recorded BE tier state (the check against the agent's own decisions), or run on
    the proposal's node (`world.ProposedWorld`)."""

    label: str
    proposal: Proposal = field(default_factory=Proposal)
    as_recorded: bool = True


@dataclass
class ReplayRun:
    """Per-frame and per-tick series of one replay, and what it would have evicted."""

    label: str
    frame_ts: list[float] = field(default_factory=list)
    be_cpu_cores: list[float] = field(default_factory=list)  # BE CPU left by suppress (cpuset CPUs or quota)
    suppress_budget_cores: list[float | None] = field(default_factory=list)
    ls_cpu_cores: list[float] = field(default_factory=list)  # non-BE pods' CPU
    be_used_cores: list[float] = field(default_factory=list)
    node_cpu_cores: list[float] = field(default_factory=list)
    capacity_ts: list[float] = field(default_factory=list)
    batch_cpu_milli: list[int] = field(default_factory=list)
    batch_memory_bytes: list[int] = field(default_factory=list)
    capacity_off: int = 0  # report ticks where colocation-config was disabled (the formula offers 0)
    # the predicted peak of prod pods (CPU milli, memory bytes) in force at each frame, and their real usage
    predicted_cpu_milli: list[float | None] = field(default_factory=list)
    actual_prod_cpu_milli: list[float] = field(default_factory=list)
    predicted_memory_bytes: list[float | None] = field(default_factory=list)
    actual_prod_memory_bytes: list[float] = field(default_factory=list)
    # training rounds where some prod pod's peak came from its model; 0: every pod was in its cold start (younger
    # than `cold_start_s`) or without a model, and the predicted peak is their requests
    modelled_rounds: int = 0
    cold_start_s: float = 0.0
    evictions: list[dict[str, Any]] = field(default_factory=list)
    # CPU burst per frame: the LS containers' CFS quota and CFS burst once its round is carried out (cores;
    # None without container facts), and how many containers it scaled up and down
    ls_quota_cores: list[float | None] = field(default_factory=list)
    ls_burst_cores: list[float | None] = field(default_factory=list)  # their CFS burst (cpu.cfs_burst_us), cores
    burst_scaled_up: list[int] = field(default_factory=list)
    burst_scaled_down: list[int] = field(default_factory=list)
    # memory QoS per frame: the memory.min and memory.low it gives every pod together, and the memory.high of
    # the pods it limits (None: it skipped)
    memory_min_bytes: list[int | None] = field(default_factory=list)
    memory_low_bytes: list[int | None] = field(default_factory=list)
    memory_high_bytes: list[int | None] = field(default_factory=list)  # memory.high of the pods it limits
    # per frame: "" where the run is on the recorded node, else what the replay had to assume (world.py)
    diverged: list[str] = field(default_factory=list)
    # pods the agent evicted that this run never did: the recording has no usage of them after the eviction
    kept_pods: list[str] = field(default_factory=list)
    matched: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    cpu_capacity_cores: float = 0.0

    # -- the figures the report compares ---------------------------------------------------------------
    def core_hours(self) -> float:
        return _integral(self.capacity_ts, [v / 1000 for v in self.batch_cpu_milli]) / 3600

    def gib_hours(self) -> float:
        return _integral(self.capacity_ts, [v / 2**30 for v in self.batch_memory_bytes]) / 3600

    def safety(self, resource: str = "cpu") -> dict[str, float]:
        """How often prod usage exceeded the predicted peak in force, and by how much (cores or GiB)."""
        pred, actual, unit = ((self.predicted_cpu_milli, self.actual_prod_cpu_milli, 1000.0) if resource == "cpu"
                              else (self.predicted_memory_bytes, self.actual_prod_memory_bytes, float(2**30)))
        over = [(a - p) / unit for p, a in zip(pred, actual) if p is not None]
        n = len(over)
        exceeded = sorted(o for o in over if o > 0)
        return {
            "frames": n, "exceeded": len(exceeded), "exceeded_fraction": (len(exceeded) / n) if n else 0.0,
            "max_over": exceeded[-1] if exceeded else 0.0,
            "p95_over": exceeded[min(int(0.95 * len(exceeded)), len(exceeded) - 1)] if exceeded else 0.0,
        }


def _integral(ts: list[float], values: list[float]) -> float:
    """Left Riemann sum: each value holds until the next tick (the last one for one median step)."""
    if not ts:
        return 0.0
    total = 0.0
    for i in range(len(ts) - 1):
        total += values[i] * (ts[i + 1] - ts[i])
    step = (ts[-1] - ts[0]) / (len(ts) - 1) if len(ts) > 1 else 0.0
    return total + values[-1] * step


def _record_of(pod: PodFacts, created_at: float) -> PodRecord:
    return PodRecord(
        uid=pod.uid, namespace=pod.namespace, name=pod.name, labels=pod.labels, annotations=pod.annotations,
        qos_class=pod.qos, priority=pod.priority, priority_class=pod.priority_class, phase=pod.phase,
        created_at=created_at, deletion_timestamp="replay" if pod.terminating else "",
        container_specs={c.name: (c.requests, c.limits) for c in pod.containers},
    )


class _Predictor:
    """The predictor's training and reclaimable estimate over frames (hookserver.predictor, unchanged)."""

    def __init__(self, settings: PredictorSettings) -> None:
        self.settings = settings
        self.table = ModelTable(cpu_half_life_s=settings.cpu_half_life_s,
                                memory_half_life_s=settings.memory_half_life_s)
        self.window: deque[tuple[float, dict[str, tuple[float, float]], float | None, float | None]] = deque()
        self.next_train = -math.inf
        self.peak: tuple[int, int] | None = None
        self.prod_reclaimable: Pair | None = None
        self.modelled = 0  # training rounds where some prod pod's peak came from its model (not cold, not its request)

    def add(self, snap: QoSSnapshot) -> None:
        pods = {p.uid: (p.cpu_usage_cores, p.memory_usage_bytes) for p in snap.pods
                if p.cpu_usage_cores is not None and p.memory_usage_bytes is not None}
        self.window.append((snap.now, pods, snap.usage.cpu_cores, snap.usage.memory_bytes))
        keep = max(self.settings.training_interval_s, 300.0)
        while self.window and self.window[0][0] < snap.now - keep:
            self.window.popleft()

    def tick(self, snap: QoSSnapshot, records: list[PodRecord]) -> None:
        if snap.now < self.next_train:
            return
        self.next_train = snap.now + self.settings.training_interval_s
        since = snap.now - self.settings.training_interval_s
        cpu: dict[str, list[float]] = {}
        mem: dict[str, list[float]] = {}
        node_cpu: list[float] = []
        node_mem: list[float] = []
        for ts, pods, nc, nm in self.window:
            if ts <= since:
                continue
            for uid, (c, m) in pods.items():
                cpu.setdefault(uid, []).append(c)
                mem.setdefault(uid, []).append(m)
            if nc is not None and nm is not None:
                node_cpu.append(nc)
                node_mem.append(nm)
        by_uid = {r.uid: r for r in records}
        samples: list[tuple[str, float, float]] = []
        sums: dict[str, list[float]] = {}
        all_c = all_m = 0.0
        for uid, values in cpu.items():
            record = by_uid.get(uid)
            if record is None:
                continue
            c, m = p90(values), p90(mem[uid])
            samples.append((uid, c, m))
            acc = sums.setdefault(pod_priority_class(record), [0.0, 0.0])
            acc[0] += c
            acc[1] += m
            all_c += c
            all_m += m
        if node_cpu:
            nc, nm = p90(node_cpu), p90(node_mem)
            samples.append((NODE_UID, nc, nm))
            samples.append((SYSTEM_UID, max(nc - all_c, 0.0), max(nm - all_m, 0.0)))
        for klass in KNOWN_PRIORITY_CLASSES:
            c, m = sums.get(klass, (0.0, 0.0))
            samples.append((priority_uid(klass), c, m))
        self.table.train(samples, snap.now)
        node = snap.node
        alloc = None if node is None else NodeAllocatable(node.cpu_allocatable_milli, node.memory_allocatable_bytes,
                                                          "status.allocatable")
        uids = [*by_uid, SYSTEM_UID, *(priority_uid(k) for k in KNOWN_PRIORITY_CLASSES)]
        recent = {uid for ts, pods, _c, _m in self.window if ts > snap.now - 300.0 for uid in pods}
        report = compute_reclaimable(
            pods=records, with_metrics=recent, predictions=self.table.predict_many(uids), allocatable=alloc,
            now=snap.now, cold_start_s=self.settings.cold_start_duration_s,
            margin_percent=self.settings.safety_margin_percent,
        )
        pod_based = report.pod_based
        self.modelled += any(line.counted_as == "predicted" for line in report.pods)
        self.peak = (pod_based.peak_cpu_milli, pod_based.peak_memory_bytes)
        self.prod_reclaimable = Pair(report.published.cpu_milli, report.published.memory_bytes) if report.published.ok else None


@dataclass(frozen=True, slots=True)
class _WindowSample:
    """One frame's share of the capacity window, summed once when it enters the window (it is averaged at every
    report tick while it stays there, five or more times): its time, each pod's CPU and memory (pods without a
    sample left out), and the node's and the system's usage (None without a node sample)."""

    now: float
    pod_cpu: tuple[tuple[str, float], ...]
    pod_mem: tuple[tuple[str, float], ...]
    node: tuple[float, float, float, float] | None  # node CPU, node memory, system CPU, system memory


def _window_sample(snap: QoSSnapshot) -> _WindowSample:
    pod_cpu: list[tuple[str, float]] = []
    pod_mem: list[tuple[str, float]] = []
    pc = pm = 0.0
    for p in snap.pods:
        if p.cpu_usage_cores is not None:
            pod_cpu.append((p.uid, p.cpu_usage_cores))
            pc += p.cpu_usage_cores
        if p.memory_usage_bytes is not None:
            pod_mem.append((p.uid, p.memory_usage_bytes))
            pm += p.memory_usage_bytes
    node = None
    if snap.usage.cpu_cores is not None and snap.usage.memory_bytes is not None:
        apps = sum(a.cpu_usage_cores for a in snap.usage.host_apps)
        node = (snap.usage.cpu_cores, snap.usage.memory_bytes, max(snap.usage.cpu_cores - pc - apps, 0.0),
                max(snap.usage.memory_bytes - pm, 0.0))
    return _WindowSample(snap.now, tuple(pod_cpu), tuple(pod_mem), node)


class _Capacity:
    """Usage averaged over the report window, and the batch formula every report interval. The window's values
    are kept per pod as frames enter and leave it (a report tick reads them, it does not rebuild them from the
    window's frames); each list keeps the frames' order, so every average is the same sum as before."""

    def __init__(self) -> None:
        self.window: deque[_WindowSample] = deque()
        self.pod_cpu: dict[str, deque[float]] = {}
        self.pod_mem: dict[str, deque[float]] = {}
        self.node: deque[tuple[float, float, float, float]] = deque()
        self.next_tick = -math.inf
        self.requests: dict[str, tuple[PodRecord, Pair]] = {}  # parsed once per pod record

    def add(self, snap: QoSSnapshot, window_s: float) -> None:
        sample = _window_sample(snap)
        self.window.append(sample)
        for uid, value in sample.pod_cpu:
            self.pod_cpu.setdefault(uid, deque()).append(value)
        for uid, value in sample.pod_mem:
            self.pod_mem.setdefault(uid, deque()).append(value)
        if sample.node is not None:
            self.node.append(sample.node)
        while self.window and self.window[0].now <= snap.now - window_s:
            self._drop(self.window.popleft())

    def _drop(self, old: _WindowSample) -> None:
        """`old` leaves the window: it is the oldest value of each of its pods (frames enter in time order)."""
        for values, items in ((self.pod_cpu, old.pod_cpu), (self.pod_mem, old.pod_mem)):
            for uid, _value in items:
                kept = values[uid]
                kept.popleft()
                if not kept:
                    del values[uid]
        if old.node is not None:
            self.node.popleft()

    def compute(self, snap: QoSSnapshot, strategy: ColocationStrategy, records: dict[str, PodRecord],
                prod_reclaimable: Pair | None) -> tuple[int, int] | None:
        node = snap.node
        if node is None:
            return None
        if not strategy.enable:
            return 0, 0
        pod_cpu, pod_mem = self.pod_cpu, self.pod_mem
        node_c = [n[0] for n in self.node]
        node_m = [n[1] for n in self.node]
        sys_c = [n[2] for n in self.node]
        sys_m = [n[3] for n in self.node]

        def avg(values: Sequence[float]) -> float:
            return sum(values) / len(values)

        pods = []
        for p in snap.pods:
            record = records[p.uid]
            cached = self.requests.get(p.uid)
            if cached is None or cached[0] is not record:
                try:
                    req = effective_requests(record)
                    cached = (record, Pair(req.cpu_milli, req.memory_bytes))
                except InputError:
                    cached = (record, Pair(0, 0))
                self.requests[p.uid] = cached
            request = cached[1]
            usage = None
            if p.uid in pod_cpu and p.uid in pod_mem:
                usage = WindowedUsage.of(Pair(int(avg(pod_cpu[p.uid]) * 1000), int(avg(pod_mem[p.uid]))))
            pods.append(PodInput(p.uid, p.key, pod_priority_class(record), p.qos, p.phase, request, usage))
        usage_facts = UsageFacts(
            node=WindowedUsage.of(Pair(int(avg(node_c) * 1000), int(avg(node_m)))) if node_c else None,
            system=WindowedUsage.of(Pair(int(avg(sys_c) * 1000), int(avg(sys_m)))) if sys_c else None,
            window_s=float(strategy.metric_aggregate_duration_seconds),
        )
        cap_node = CapacityNode(name=node.name, capacity=Pair(node.cpu_capacity_milli, node.memory_capacity_bytes),
                                allocatable=Pair(node.cpu_allocatable_milli, node.memory_allocatable_bytes))
        result = compute_capacity(strategy, cap_node, pods, usage_facts, prod_reclaimable=prod_reclaimable)
        return result.value(BATCH_CPU), result.value(BATCH_MEMORY)


def _reconcilers(recording: Recording) -> list[Reconciler]:
    settings = recording.reconciler_settings
    out: list[Reconciler] = []
    for cls in _REPLAYED:
        own = settings.get(cls.name, {})
        out.append(cls(interval_s=own.get("interval_s"), cooldown_s=own.get("cooldown_s")))
    return out


def _verdict_plan(r: Reconciler, snap: QoSSnapshot, state: Any) -> QoSPlan:
    """What the runner does: any of the reconciler's gates on, then its NodeSLO check."""
    if not any(snap.gate_on(g.name) for g in r.gates):
        return r.plan_disabled(snap, state, "feature gates off")
    verdict = r.enabled(snap)
    return r.plan(snap, state) if verdict.enabled else r.plan_disabled(snap, state, verdict.reason)


def _be_cores(plan: QoSPlan, capacity_cores: float) -> float:
    n = plan.numbers
    if n.get("policy") == "cpuset" and isinstance(n.get("cpus"), int):
        return float(n["cpus"])
    if n.get("policy") == "cfsQuota" and isinstance(n.get("quota_us"), int):
        return float(n["quota_us"]) / _CFS_PERIOD_US
    return capacity_cores


def _part2_series(run: ReplayRun, name: str, snap: QoSSnapshot, plan: QoSPlan) -> None:
    if name == CPUBurst.name:
        quota, burst = ls_cfs_cores(snap, plan)
        run.ls_quota_cores.append(quota)
        run.ls_burst_cores.append(burst)
        run.burst_scaled_up.append(int(plan.numbers.get("scaled_up", 0) or 0))
        run.burst_scaled_down.append(int(plan.numbers.get("scaled_down", 0) or 0))
    elif name == MemoryQoS.name:
        for series, key in ((run.memory_min_bytes, "min_total"), (run.memory_low_bytes, "low_total"),
                            (run.memory_high_bytes, "high_total")):
            value = plan.numbers.get(key)
            series.append(value if isinstance(value, int) and not plan.skipped else None)


def _agent_round(r: Reconciler, frame: Frame, recorded: Decision | None) -> Callable[[], Files] | None:
    """The CFS files after the agent's own round of `r` on the recorded frame (from the recorded state and
    config), for `ProposedContainers.planned` to tell which files the proposal set otherwise."""
    if recorded is None or frame.states is None:
        return None
    kept = frame.states.get(r.name)

    def agent_plan() -> QoSPlan:
        return _verdict_plan(r, frame.snapshot, restore_state(r.name, r.initial_state(frame.snapshot.now), kept))

    return lambda: ProposedContainers.agent_files(recorded, frame.snapshot, agent_plan)


def _agent_evictions(recording: Recording) -> dict[str, float]:
    first: dict[str, float] = {}
    for e in recording.evictions():
        first.setdefault(str(e["pod_uid"]), float(e["ts"]))
    return first


def replay(recording: Recording, config: ReplayConfig) -> ReplayRun:
    """One pass over the recording under `config` (module docstring)."""
    run = ReplayRun(config.label)
    reconcilers = _reconcilers(recording)
    started = recording.agent_started_at
    states: dict[str, Any] = {}
    predictor_fields = {**recording.predictor_settings, **dict(config.proposal.predictor)}
    predictor = _Predictor(PredictorSettings.model_validate(predictor_fields))
    capacity = _Capacity()
    overlay = FrameOverlay(config.proposal, config.label)
    round_s = float(recording.reconciler_settings.get(CPUSuppress.name, {}).get("interval_s") or 1.0)
    world = None if config.as_recorded else ProposedWorld(_agent_evictions(recording), round_s)
    containers = None if config.as_recorded else ProposedContainers(
        memory_proposed=config.proposal.names_memory_qos(tuple(g.name for g in MemoryQoS.gates)))
    suppress = next(r for r in reconcilers if r.name == CPUSuppress.name)

    burst = next(r for r in reconcilers if r.name == CPUBurst.name)
    burst_s = float(recording.reconciler_settings.get(CPUBurst.name, {}).get("interval_s") or 1.0)

    def suppress_round(s: QoSSnapshot, state: Any) -> tuple[QoSPlan, Any]:
        plan = _verdict_plan(suppress, s, state)
        return plan, suppress.commit(plan, RoundOutcome(dry_run=False), state, s.now)

    def burst_round(s: QoSSnapshot, state: Any) -> tuple[QoSPlan, Any]:
        plan = _verdict_plan(burst, s, state)
        return plan, burst.commit(plan, RoundOutcome(dry_run=False), state, s.now)

    evict_window = EvictWindow()
    evictor_gates = tuple(g.name for g in CPUEvict.gates)
    records: dict[str, PodRecord] = {}
    for frame in recording.frames():
        snap = frame.snapshot
        if not states:
            states = {r.name: r.initial_state(min(started, snap.now) if started else snap.now) for r in reconcilers}
        evict_window.add(snap)
        snap, window_assumed = evict_window.snapshot(snap, overlay.snapshot(snap))
        divergence = Divergence()
        if window_assumed and any(snap.gate_on(g) for g in evictor_gates):
            divergence = replace(divergence, assumed=(window_assumed,))
        if world is not None:
            states[suppress.name] = world.catch_up(snap.now, suppress_round, states[suppress.name])
            snap, moved = world.snapshot(snap)
            divergence = replace(moved, assumed=divergence.assumed)
        if containers is not None:
            states[burst.name] = containers.catch_up(snap.now, burst_round, states[burst.name], burst_s)
            snap = containers.snapshot(snap)
            divergence = replace(divergence, part2=containers.assumed())
        run.diverged.append(divergence.text() if divergence else "")
        node = snap.node
        capacity_cores = node.cpu_capacity_milli / 1000 if node is not None else 0.0
        run.cpu_capacity_cores = capacity_cores
        for r in reconcilers:
            recorded = frame.decisions.get(r.name)
            if r.name in KEPT and frame.states is not None and (containers is None or containers.follows(r.name)):
                states[r.name] = restore_state(r.name, states[r.name], frame.states.get(r.name))
            plan = _verdict_plan(r, snap, states[r.name])
            picked = [e for e in would_evict(plan) if not e.pending]
            states[r.name] = r.commit(plan, RoundOutcome(dry_run=False, evicted=len(picked)), states[r.name], snap.now)
            if config.as_recorded and recorded is not None:
                mine = comparable(decision_of(plan), recorded)
                if mine.text() == recorded.text():
                    run.matched += 1
                else:
                    run.mismatches.append({"ts": snap.now, "reconciler": r.name, "recorded": recorded.text(),
                                           "replayed": mine.text()})
            for item in picked:
                req = item.request
                run.evictions.append({"ts": snap.now, "reconciler": r.name, "pod": req.key, "uid": req.pod_uid,
                                      "reason": req.reason, "mode": item.mode, "message": req.message})
            if world is not None:
                world.evicted([item.request.pod_uid for item in picked], snap.now,
                              recorded.evict if recorded is not None else ())
            if r is suppress:
                run.be_cpu_cores.append(_be_cores(plan, capacity_cores))
                budget = plan.numbers.get("budget_milli")
                run.suppress_budget_cores.append(budget / 1000 if isinstance(budget, int) else None)
                if world is not None:
                    world.suppressed(snap, plan, recorded)
            elif r.name in KEPT:
                _part2_series(run, r.name, snap, plan)
                if containers is not None:
                    agent = _agent_round(r, frame, recorded) if r is burst else None
                    containers.planned(r.name, snap, plan, recorded, agent)
        # usage as it really was
        run.frame_ts.append(snap.now)
        ls = sum(p.cpu_usage_cores or 0.0 for p in snap.pods if not p.is_be)
        run.ls_cpu_cores.append(ls)
        run.be_used_cores.append(sum(p.cpu_usage_cores or 0.0 for p in snap.pods if p.is_be))
        run.node_cpu_cores.append(snap.usage.cpu_cores or 0.0)
        for p in snap.pods:
            if p.uid not in records or records[p.uid].phase != p.phase or bool(records[p.uid].deletion_timestamp) != p.terminating:
                records[p.uid] = _record_of(p, recording.created_at.get(p.uid, 0.0))
        current = [records[p.uid] for p in snap.pods]
        # the predictor: train, then hold its peak against what prod pods really used
        predictor.add(snap)
        predictor.tick(snap, current)
        prod = [p for p in snap.pods if reclaimable_for_prod(pod_priority_class(records[p.uid])) and p.active]
        run.actual_prod_cpu_milli.append(1000 * sum(p.cpu_usage_cores or 0.0 for p in prod))
        run.actual_prod_memory_bytes.append(sum(p.memory_usage_bytes or 0.0 for p in prod))
        run.predicted_cpu_milli.append(float(predictor.peak[0]) if predictor.peak else None)
        run.predicted_memory_bytes.append(float(predictor.peak[1]) if predictor.peak else None)
        # batch capacity
        strategy = overlay.strategy(frame.colocation)
        capacity.add(snap, float(strategy.metric_aggregate_duration_seconds))
        if snap.now >= capacity.next_tick:
            capacity.next_tick = snap.now + strategy.metric_report_interval_seconds
            values = capacity.compute(snap, strategy, records, predictor.prod_reclaimable)
            if values is not None:
                run.capacity_off += not strategy.enable
                run.capacity_ts.append(snap.now)
                run.batch_cpu_milli.append(values[0])
                run.batch_memory_bytes.append(values[1])
    if world is not None:
        run.kept_pods = sorted(set(world.agent_evicted) - world.evicted_here)
    run.modelled_rounds = predictor.modelled
    run.cold_start_s = predictor.settings.cold_start_duration_s
    return run


def replay_file(path: str, config: ReplayConfig) -> ReplayRun:
    """Replay the file at `path`; a page SQLite finds bad on the way is a RecordingError, not a traceback."""
    try:
        recording = Recording(path)
        try:
            return replay(recording, config)
        finally:
            recording.close()
    except sqlite3.Error as exc:
        raise explain_sqlite_error(path, exc) from None


def replay_many(path: str, configs: list[ReplayConfig]) -> list[ReplayRun]:
    """Each configuration in its own process when there is more than one CPU: the runs share nothing, and a
    day of 200 pods is CPU-bound Python."""
    if len(configs) < 2 or (os.cpu_count() or 1) < 2:
        return [replay_file(path, c) for c in configs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=min(len(configs), os.cpu_count() or 1)) as pool:
        return list(pool.map(replay_file, [path] * len(configs), configs))
