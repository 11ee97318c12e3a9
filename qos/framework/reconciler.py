"""The reconciler contract: a name, an interval, its feature gates, an enabled check, and a pure planner.

Most reconcilers declare one `gate`. One that carries several koordlet modes (the CPU evictor: BECPUEvict,
CPUAllocatableEvict, CPUEvict) declares them all in `gates`, in its own order: the runner runs it when any is
on, and the planner reads which are on from `snapshot.gate_on(name)` (the runner sets the resolved gates on
the snapshot), so `plan` stays a pure function of its inputs. `gate` is then the first of `gates`.

A reconciler never reads a file, never calls the apiserver and never writes: `plan(snapshot, state)`
returns a `QoSPlan`, and the runner carries it out. What it must remember between rounds (a cool-down
start, the last target) travels as `state`: `initial_state()` gives the first, `plan` proposes the next
in `QoSPlan.state`, and `commit` turns it into the kept state once the runner knows what happened
(e.g. only a round that really evicted starts a cool-down). A replay calls `plan` and keeps nothing.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar

from hookserver.featuregates import FeatureGate
from qos.framework.plan import QoSPlan
from qos.snapshot.model import QoSSnapshot

__all__ = ["Reconciler", "RoundOutcome", "Verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether the effective NodeSLO lets the reconciler act, and why (shown by `hookctl qos`)."""

    enabled: bool
    reason: str


@dataclass(frozen=True, slots=True)
class RoundOutcome:
    """What the runner did with a plan: writes that failed, evictions that went through."""

    dry_run: bool
    writes_ok: int = 0
    writes_failed: int = 0
    evicted: int = 0
    released: float = 0.0
    statuses: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))


class Reconciler(abc.ABC):
    """Subclass, set `name`, `gate` (or `gates`), `default_interval_s` (and `default_cooldown_s`), implement `plan`."""

    name: ClassVar[str]
    gate: ClassVar[FeatureGate]
    gates: ClassVar[tuple[FeatureGate, ...]] = ()
    default_interval_s: ClassVar[float] = 1.0
    default_cooldown_s: ClassVar[float] = 0.0
    # What the reconciler touches, for `hookctl qos` ("cgroup", "eviction").
    acts_on: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "gates" in own and own["gates"]:
            cls.gate = cls.gates[0]
        elif "gate" in own:
            cls.gates = (cls.gate,)

    def __init__(self, *, interval_s: float | None = None, cooldown_s: float | None = None) -> None:
        self.interval_s = float(interval_s if interval_s is not None else self.default_interval_s)
        self.cooldown_s = float(cooldown_s if cooldown_s is not None else self.default_cooldown_s)
        if self.interval_s <= 0:
            raise ValueError(f"{self.name}: interval must be positive, got {self.interval_s}")

    def enabled(self, snapshot: QoSSnapshot) -> Verdict:
        """The NodeSLO check. The default: on."""
        return Verdict(True, "enabled")

    def initial_state(self, now: float) -> Any:
        return None

    @abc.abstractmethod
    def plan(self, snapshot: QoSSnapshot, state: Any) -> QoSPlan:
        """Snapshot in, plan out. Pure: no I/O, no mutation of `state`."""

    def plan_disabled(self, snapshot: QoSSnapshot, state: Any, why: str) -> QoSPlan:
        """The round when the gate is off or the NodeSLO disables it. Override to restore what the
        reconciler changed (CPU suppress gives BE its CPUs back); the default does nothing."""
        return QoSPlan.skip(self.name, why, state=state)

    def commit(self, plan: QoSPlan, outcome: RoundOutcome, state: Any, now: float) -> Any:
        """The state to keep after `plan` was carried out (or dry-run). Default: the plan's proposal."""
        return plan.state if plan.state is not None else state

    def gauges(self, plan: QoSPlan) -> Mapping[str, float]:
        """Values the runner exports after a round: `suppress:<type>` and `ls_used` feed koordlet's
        `koordlet_be_suppress_*` gauges, any other name `hookserver_qos_value{reconciler,name}`."""
        return MappingProxyType({})

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "gate": self.gate.name,
            "gates": [g.name for g in self.gates],
            "interval_s": self.interval_s,
            "cooldown_s": self.cooldown_s,
            "acts_on": list(self.acts_on),
        }
