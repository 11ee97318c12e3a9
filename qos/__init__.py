"""QoS reconcilers (areas layer, beside hooks, executor, informer and collectors; never imports them or
`kubernetes`): keep latency-sensitive pods safe by suppressing and evicting best-effort pods.

How a round works
-----------------
`QoSRunner` (runner.py) ticks on the daemon's loop, once the informer has synced for the first time (a
round on the default NodeSLO would undo suppression at every restart). Each tick it builds ONE `QoSSnapshot` (snapshot.py;
built by readers.py from the store, the collectors' series and the BE tier's cgroup files), then for every
reconciler whose interval is due: checks its feature gate (gates.py) and its NodeSLO switch
(`Reconciler.enabled`), calls the pure planner `plan(snapshot, state) -> QoSPlan` (plan.py), carries the
plan out (cgroup writes through the resource executor as `ResourcePlan`s, evictions through the
`EvictionGuard` in evictions.py and whichever backend the daemon wired: the Eviction API, the standalone
killer, or report-only), records the plan and each eviction in the audit, and keeps the state the
reconciler proposes (`commit`). An exception in one reconciler is counted, logged and shown by `hookctl
qos`; the others run. `--qos-dry-run` or `qos.reconcilers.<name>.dry_run` plans and audits without acting.

How to add a reconciler
-----------------------
1. A module `qos/<name>.py` with a subclass of `qos.reconciler.Reconciler`:

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
   results in `QoSPlan.numbers` (`qos.plan.numbers(...)`).
   Override `plan_disabled` to undo what you changed when the gate or NodeSLO turns you off, `commit`
   for cool-downs, and `gauges` to export values. Evictions are `PlannedEviction`s in eviction order with
   `numbers["releases"]`, and `QoSPlan.numbers["release_target"]` says when to stop; or, for a round across
   modes, give `QoSPlan.release_targets` and let `qos.evict_round.walk` decide (see qos/evict_round.py).
   A reconciler carrying several koordlet modes declares `gates = (FeatureGate(...), ...)` instead of
   `gate`: the runner runs it while any is on, and `plan` reads `snapshot.gate_on(name)` per mode.
2. Append the class to `RECONCILER_TYPES` in qos/registry.py. Its gates are then known to
   `--feature-gates` / `feature_gates:` (koordlet's defaults: CPUBurst on, RdtResctrl on, CgroupReconcile,
   SystemConfig and BlkIOReconcile off), and `hookctl qos` / `hookctl qos plan <name>` show it.
3. If it needs an input the snapshot lacks, add a typed field to `QoSSnapshot` and read it in readers.py
   (all I/O of a round happens there), then test `plan()` on scripted snapshots with hand-computed values.

Only the settings and gates are imported eagerly: `hookserver.config` imports them, and loading them must
not pull in the executor (which imports the config): everything else loads on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from qos.gates import FeatureGate, GateRegistry, GateValue, GateValues, parse_feature_gates
from qos.settings import QoSSettings, ReconcilerSettings

if TYPE_CHECKING:
    from qos.evictions import EvictionGuard, ReportOnlyBackend
    from qos.plan import PlannedEviction, QoSPlan, numbers
    from qos.reconciler import Reconciler, RoundOutcome, Verdict
    from qos.registry import RECONCILER_TYPES, build_reconcilers, gate_registry
    from qos.runner import QoSRunner
    from qos.snapshot import BEStats, BETier, NodeFacts, NodeUsage, PodFacts, QoSSnapshot

__all__ = [
    "RECONCILER_TYPES",
    "BEStats",
    "BETier",
    "EvictionGuard",
    "FeatureGate",
    "GateRegistry",
    "GateValue",
    "GateValues",
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
    "parse_feature_gates",
]

_LAZY = {
    "EvictionGuard": "qos.evictions",
    "ReportOnlyBackend": "qos.evictions",
    "PlannedEviction": "qos.plan",
    "QoSPlan": "qos.plan",
    "numbers": "qos.plan",
    "Reconciler": "qos.reconciler",
    "RoundOutcome": "qos.reconciler",
    "Verdict": "qos.reconciler",
    "RECONCILER_TYPES": "qos.registry",
    "build_reconcilers": "qos.registry",
    "gate_registry": "qos.registry",
    "QoSRunner": "qos.runner",
    "BEStats": "qos.snapshot",
    "BETier": "qos.snapshot",
    "NodeFacts": "qos.snapshot",
    "NodeUsage": "qos.snapshot",
    "PodFacts": "qos.snapshot",
    "QoSSnapshot": "qos.snapshot",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'qos' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
