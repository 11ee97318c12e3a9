"""QoS reconcilers (areas layer, beside hooks, executor, informer and collectors; never imports them or
`kubernetes`): keep latency-sensitive pods safe by suppressing and evicting best-effort pods, and keep the
kernel's QoS knobs (CPU burst, memory QoS, blkio, resctrl, system settings, group identity) where NodeSLO says.

The rooms
---------
    qos/framework/    the machinery: Reconciler, QoSPlan, the runner, the eviction guard and round, one
                      owner per knob, metrics, the `hookctl qos` views; it imports no reconciler
    qos/snapshot/     the one input (QoSSnapshot, its kernel part) and its one reader (SnapshotBuilder)
    qos/registry.py   the list of reconcilers, as koordlet's qosManager lists its plugins
    qos/settings.py   the `qos:` settings (a leaf the config collects)
    the reconcilers, by koordlet plugin:
    qos/cpu/          CPUSuppress (suppress.py, cpuset_pick.py), CPUBurst (burst.py, burst_metrics.py)
    qos/eviction/     CPUEvict (cpu.py), MemoryEvict (memory.py), their modes (modes.py), candidate order
                      (order.py) and the evictor both are (resource_evictor.py)
    qos/memory_qos.py   MemoryQoS (koordlet's cgreconcile)
    qos/blkio.py        BlkIOReconcile
    qos/resctrl.py      RdtResctrl
    qos/system_config.py SystemConfig (sysreconcile)
    qos/group_identity.py GroupIdentity (bvt.warm_ns; a runtime hook in koordlet, a reconciler here)
    qos/isolation/    isolation beyond CPU and memory: OOMScoreAdj (oom_score_adj.py; a runtime hook in
                      koordlet whose only action is its reconciler), PodResctrl (pod_resctrl.py; koordlet's
                      pod-level Resctrl hook)

How a round works
-----------------
`QoSRunner` (framework/runner.py) ticks on the daemon's loop, once the informer has synced for the first time
(a round on the default NodeSLO would undo suppression at every restart). Each tick it builds ONE
`QoSSnapshot` (`qos.snapshot.SnapshotBuilder`: the store, the collectors' series, the BE tier's cgroup files
and, for the gates that are on, the kernel's files), then for every reconciler whose interval is due: checks
its feature gate (`hookserver.featuregates`) and its NodeSLO switch (`Reconciler.enabled`), calls the pure
planner `plan(snapshot, state) -> QoSPlan` (framework/plan.py), carries the plan out (cgroup writes through
the resource executor as `ResourcePlan`s, evictions through the `EvictionGuard` in framework/evictions.py and
whichever backend the daemon wired: the Eviction API, the standalone killer, or report-only), records the
plan and each eviction in the audit, and keeps the state the reconciler proposes (`commit`). An exception in
one reconciler is counted, logged and shown by `hookctl qos`; the others run. `--qos-dry-run` or
`qos.reconcilers.<name>.dry_run` plans and audits without acting.

How to add a reconciler
-----------------------
1. A module in the room of its kind (`qos/cpu/`, `qos/eviction/`, or `qos/<name>.py` for a kind of its own)
   with a subclass of `qos.framework.reconciler.Reconciler`:

       class CPUBurst(Reconciler):
           name = "CPUBurst"                                  # shown by hookctl qos; key in qos.reconcilers
           gate = FeatureGate("CPUBurst", True, "CFS burst and quota burst for LS pods")  # koordlet's name/default
           default_interval_s = 1.0
           acts_on = ("cgroup",)

           def enabled(self, snap: QoSSnapshot) -> Verdict:   # the NodeSLO switch, with a reason
               ...
           def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
               ...                                            # pure: read `snap`, return writes/evictions

   Writes are `hookserver.executor.plan.ResourcePlan`s of `CgroupWrite`s whose `reason` carries the
   numbers; use `leveled=True` with levels top-down (tier, pods, containers) when a parent must stay >=
   its children. A node file that is not a cgroup (a sysctl, a resctrl group, schemata or tasks) is a
   `hookserver.executor.plan.FileWrite` in `QoSPlan.files`, carried out by the daemon's system-file executor
   (hookserver/executor/sysfiles.py: path containment, audit, originals recorded before the first write);
   a plan with files and no such executor wired fails that reconciler's round. Put the round's inputs and
   results in `QoSPlan.numbers` (`qos.framework.plan.numbers(...)`).
   Override `plan_disabled` to undo what you changed when the gate or NodeSLO turns you off, `commit`
   for cool-downs, and `gauges` to export values. Evictions are `PlannedEviction`s in eviction order with
   `numbers["releases"]`, and `QoSPlan.numbers["release_target"]` says when to stop; or, for a round across
   modes, give `QoSPlan.release_targets` and let `qos.framework.evict_round.walk` decide.
   A reconciler carrying several koordlet modes declares `gates = (FeatureGate(...), ...)` instead of
   `gate`: the runner runs it while any is on, and `plan` reads `snapshot.gate_on(name)` per mode.
2. Append the class to `RECONCILER_TYPES` in qos/registry.py. Its gates are then known to
   `--feature-gates` / `feature_gates:` (koordlet's defaults: CPUBurst on, RdtResctrl on, CgroupReconcile,
   SystemConfig and BlkIOReconcile off), and `hookctl qos` / `hookctl qos plan <name>` show it.
3. If it needs an input the snapshot lacks, add a typed field to `QoSSnapshot` (qos/snapshot/model.py, or
   the kernel part in qos/snapshot/kernel.py) and read it in qos/snapshot/builder.py (or kernel_reader.py):
   all I/O of a round happens there. Then test `plan()` on scripted snapshots with hand-computed values.

Only the settings load with this package (the config collects them); everything else loads on first use, so
`hookserver --help` and the config's validation do not import the reconcilers.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from qos.settings import QoSSettings, ReconcilerSettings

if TYPE_CHECKING:
    from qos.framework.evictions import EvictionGuard, ReportOnlyBackend
    from qos.framework.plan import PlannedEviction, QoSPlan, numbers
    from qos.framework.reconciler import Reconciler, RoundOutcome, Verdict
    from qos.framework.runner import QoSRunner
    from qos.registry import RECONCILER_TYPES, build_reconcilers, gate_registry
    from qos.snapshot.model import BEStats, BETier, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

__all__ = [
    "RECONCILER_TYPES",
    "BEStats",
    "BETier",
    "EvictionGuard",
    "NodeFacts",
    "NodeUsage",
    "PlannedEviction",
    "PodFacts",
    "QoSPlan",
    "QoSRunner",
    "QoSSettings",
    "QoSSnapshot",
    "Reconciler",
    "ReconcilerSettings",
    "ReportOnlyBackend",
    "RoundOutcome",
    "Verdict",
    "build_reconcilers",
    "gate_registry",
    "numbers",
]

_LAZY = {
    "EvictionGuard": "qos.framework.evictions",
    "ReportOnlyBackend": "qos.framework.evictions",
    "PlannedEviction": "qos.framework.plan",
    "QoSPlan": "qos.framework.plan",
    "numbers": "qos.framework.plan",
    "Reconciler": "qos.framework.reconciler",
    "RoundOutcome": "qos.framework.reconciler",
    "Verdict": "qos.framework.reconciler",
    "RECONCILER_TYPES": "qos.registry",
    "build_reconcilers": "qos.registry",
    "gate_registry": "qos.registry",
    "QoSRunner": "qos.framework.runner",
    "BEStats": "qos.snapshot.model",
    "BETier": "qos.snapshot.model",
    "NodeFacts": "qos.snapshot.model",
    "NodeUsage": "qos.snapshot.model",
    "PodFacts": "qos.snapshot.model",
    "QoSSnapshot": "qos.snapshot.model",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qos' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
