"""One eviction round across modes, as koordlet runs it (qosmanager/plugins/util/evict.go, KillAndEvictPods).

A resource's evictor (CPU or memory) asks each mode whose gate is on, in koordlet's order, what it wants
released; the modes that want something form one round:

* each mode has a goal (`ReleaseTarget`: amounts per resource, counted by "request" or "used") and its
  candidates in its own order;
* the round goes through the modes in order; a mode whose goal is already covered evicts nothing; else its
  candidates go one by one until it is;
* what a pod frees counts toward every goal of the same kind (cumulative release): a Batch pod the BE
  satisfaction mode picked counts its batch-cpu request toward the allocatable mode's batch-cpu goal. The
  amount a pod frees is, per kind and resource, the largest that any mode of the round credits it with;
* a pod already on its way out (evicted by this agent within the cool-down, or terminating) is "pending
  release": met in a candidate list it counts as released and is not evicted again, so a slow termination is
  not answered with more evictions (koordinator #3137; here terminating pods count too);
* a pod is evicted at most once per round; a failed eviction frees nothing and the next candidate is tried.

The planner calls `walk` with "every eviction succeeds" to show what it would do; the runner calls it with
the real outcomes. Both see the same plan value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.eviction import EvictionRequest

from qos.framework.plan import Numbers, PlannedEviction, QoSPlan, ReleaseTarget, numbers
from qos.snapshot.model import PodFacts

__all__ = ["Candidate", "ModeResult", "Step", "WalkResult", "assemble", "walk"]

Contribution = Callable[[PodFacts], Mapping[str, float]]
_NONE: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Candidate:
    """A pod in a mode's order, with the sentence and numbers that say why it is there."""

    pod: PodFacts
    message: str
    numbers: Numbers


@dataclass(frozen=True, slots=True)
class ModeResult:
    """What one mode decided from the snapshot. `target` None: nothing to release (then `summary` says why,
    and `skipped` is set when the mode could not judge at all: bad config, no data). `contribution` says what
    a pod frees by this mode's count ("kind/resource" -> amount); it applies to any pod the round evicts."""

    mode: str
    summary: str
    numbers: Numbers
    reason: str = ""
    target: ReleaseTarget | None = None
    candidates: tuple[Candidate, ...] = ()
    contribution: Contribution = field(default=lambda pod: _NONE)
    skipped: str = ""
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Step:
    item: PlannedEviction
    action: str  # "evict" (done), "pending" (counted, already on its way out), "failed"


@dataclass(frozen=True, slots=True)
class WalkResult:
    steps: tuple[Step, ...]
    released: Mapping[str, float]
    unmet: tuple[str, ...]

    def picked(self, mode: str | None = None) -> list[PlannedEviction]:
        return [s.item for s in self.steps if s.action == "evict" and (mode is None or s.item.mode == mode)]

    def pending(self, mode: str | None = None) -> list[PlannedEviction]:
        return [s.item for s in self.steps if s.action == "pending" and (mode is None or s.item.mode == mode)]


def _covered(target: ReleaseTarget, released: Mapping[str, float]) -> bool:
    return all(released.get(f"{target.kind}/{res}", 0.0) >= amount for res, amount in target.resources.items())


def walk(
    targets: Sequence[ReleaseTarget], items: Sequence[PlannedEviction], evict: Callable[[PlannedEviction], bool]
) -> WalkResult:
    """Go through the modes in order; `evict(item)` carries one eviction out and says whether it went through."""
    released: dict[str, float] = {}
    done: set[str] = set()
    steps: list[Step] = []
    for target in targets:
        if _covered(target, released):
            continue
        for item in items:
            if item.mode != target.mode or item.request.pod_uid in done:
                continue
            if item.pending:
                action = "pending"
            else:
                action = "evict" if evict(item) else "failed"
            steps.append(Step(item, action))
            if action == "failed":
                continue
            done.add(item.request.pod_uid)
            for key, amount in item.releases.items():
                released[key] = released.get(key, 0.0) + amount
            if _covered(target, released):
                break
    unmet = tuple(t.mode for t in targets if not _covered(t, released))
    return WalkResult(tuple(steps), MappingProxyType(released), unmet)


def _merge(funcs: Sequence[Contribution], pod: PodFacts) -> Mapping[str, float]:
    out: dict[str, float] = {}
    for f in funcs:
        for key, amount in f(pod).items():
            if amount > out.get(key, float("-inf")):
                out[key] = float(amount)
    return MappingProxyType(out)


def assemble(reconciler: str, modes: Sequence[ModeResult], *, state: Any, off: Sequence[str] = ()) -> QoSPlan:
    """The round's plan: every acting mode's candidates (with what each frees), the goals in order, the numbers
    of every mode under `<mode>.<name>`, and a summary of what the round would do if every eviction went
    through. `off`: the modes whose gate is off (named in the notes)."""
    acting = [m for m in modes if m.target is not None]
    funcs = [m.contribution for m in acting]
    items: list[PlannedEviction] = []
    for m in acting:
        for c in m.candidates:
            p = c.pod
            items.append(PlannedEviction(
                EvictionRequest(pod_uid=p.uid, namespace=p.namespace, name=p.name, reason=m.reason, message=c.message,
                                reconciler=reconciler, cgroup_dirs=p.cgroup_dirs, labels=p.labels),
                c.numbers, mode=m.mode, releases=_merge(funcs, p), pending=p.terminating,
            ))
    targets = tuple(m.target for m in acting if m.target is not None)
    result = walk(targets, items, lambda item: True)
    values: dict[str, float | int | str] = {"modes": ",".join(m.mode for m in modes)}
    notes: list[str] = []
    lines: list[str] = []
    for m in modes:
        values.update({f"{m.mode}.{k}": v for k, v in m.numbers.items()})
        notes.extend(f"{m.mode}: {n}" for n in m.notes)
        if m.target is None:
            notes.append(f"{m.mode}: {m.summary}")
            continue
        picked, pending = result.picked(m.mode), result.pending(m.mode)
        values[f"{m.mode}.candidates"] = sum(1 for i in items if i.mode == m.mode)
        values[f"{m.mode}.would_evict"] = len(picked)
        values[f"{m.mode}.pending_pods"] = len(pending)
        for key in sorted({k for i in pending for k in i.releases}):
            values[f"{m.mode}.pending_release.{key}"] = sum(i.releases.get(key, 0.0) for i in pending)
        goal = ", ".join(f"{res} {amount}" for res, amount in m.target.resources.items())
        line = f"{m.mode}: {m.summary}; release {goal} ({m.target.kind})"
        if pending:
            line += f"; {len(pending)} pod(s) already on their way out count as released"
        line += f"; evict {len(picked)} of {values[f'{m.mode}.candidates']}"
        if m.mode in result.unmet:
            line += " (not enough candidates to cover it)"
        lines.append(line)
        notes.append(line)
    notes.extend(f"{name}: feature gate off" for name in off)
    if not lines:
        quiet = "; ".join(f"{m.mode}: {m.summary}" for m in modes) or "no eviction mode is on"
        skipped = all(m.skipped for m in modes) and bool(modes)
        if skipped:
            return QoSPlan.skip(reconciler, quiet, state=state, **values)
        return QoSPlan(reconciler, quiet, numbers(**values), notes=tuple(notes), state=state)
    return QoSPlan(reconciler, " | ".join(lines), numbers(**values), evictions=tuple(items), notes=tuple(notes),
                   state=state, release_targets=targets)
