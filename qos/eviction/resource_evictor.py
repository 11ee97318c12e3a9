"""What the CPU and memory evictors share: one reconciler per resource carrying several koordlet modes, each
behind its own feature gate, run as one round (qos.framework.evict_round) under one cool-down.

The reconciler runs when any of its gates is on (the runner's rule for multi-gate reconcilers); each mode
acts only when its own gate is on (`snapshot.gate_on`). `enable: false` in the NodeSLO turns them all off,
as koordlet's IsFeatureDisabled does for every one of these gates. A mode whose config is invalid is
skipped with the reason; the others still run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from qos.framework.evict_round import ModeResult, assemble
from qos.framework.plan import QoSPlan
from qos.framework.reconciler import Reconciler, RoundOutcome, Verdict
from qos.snapshot.model import QoSSnapshot

__all__ = ["EvictState", "ResourceEvictor"]


@dataclass(frozen=True, slots=True)
class EvictState:
    """When this evictor last evicted (the cool-down runs from here)."""

    last_evict: float


class ResourceEvictor(Reconciler):
    """Subclass: set `gates` in koordlet's round order, `resource`, and implement `mode` and `capacity`."""

    resource: ClassVar[str]

    def mode(self, snap: QoSSnapshot, gate: str) -> ModeResult:
        raise NotImplementedError

    def capacity(self, snap: QoSSnapshot) -> int:
        raise NotImplementedError

    def config_problem(self, snap: QoSSnapshot, gate: str) -> str:
        """Why the NodeSLO's fields for this mode are unusable, or "" (koordlet's per-mode config check)."""
        raise NotImplementedError

    def modes_on(self, snap: QoSSnapshot) -> list[str]:
        return [g.name for g in self.gates if snap.gate_on(g.name)]

    def enabled(self, snap: QoSSnapshot) -> Verdict:
        if not snap.slo.resource_used_threshold_with_be.enable:
            return Verdict(False, "NodeSLO resourceUsedThresholdWithBE.enable is false")
        on = self.modes_on(snap)
        if not on:
            return Verdict(False, "no eviction mode's feature gate is on")
        problems = {name: self.config_problem(snap, name) for name in on}
        if all(problems.values()):
            return Verdict(False, "; ".join(f"{name}: invalid NodeSLO: {why}" for name, why in problems.items()))
        return Verdict(True, "modes " + ", ".join(name + (" (skipped: invalid NodeSLO)" if problems[name] else "")
                                                  for name in on))

    def initial_state(self, now: float) -> Any:
        return EvictState(last_evict=now)

    def plan(self, snap: QoSSnapshot, state: Any) -> QoSPlan:
        st = state if isinstance(state, EvictState) else EvictState(0.0)
        since = snap.now - st.last_evict
        if since < self.cooldown_s:
            return QoSPlan.skip(self.name, f"cooling down ({since:.1f}s of {self.cooldown_s:.0f}s since the last eviction or start)",
                                state=st)
        if snap.node is None or self.capacity(snap) <= 0:
            return QoSPlan.skip(self.name, f"no node {self.resource} capacity", state=st)
        on = self.modes_on(snap)
        off = [g.name for g in self.gates if g.name not in on]
        return assemble(self.name, [self.mode(snap, name) for name in on], state=st, off=off)

    def commit(self, plan: QoSPlan, outcome: RoundOutcome, state: Any, now: float) -> Any:
        """Only a round that really evicted someone starts the cool-down (koordlet's hasReleased)."""
        if outcome.evicted > 0:
            return EvictState(last_evict=now)
        return state
