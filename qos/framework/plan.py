"""What a reconciler's round decided: cgroup writes (as the executor's `ResourcePlan`s), evictions, and
why, with the numbers that led to each item. A plan is a value: it can be shown, audited, replayed and
compared, and carrying it out is the runner's job, not the planner's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.eviction import EvictionRequest
from hookserver.executor.plan import CookieOp, FileWrite, NetCommand, ResourcePlan

__all__ = ["Numbers", "PlannedEviction", "QoSPlan", "ReleaseTarget", "kernel_part_skip", "numbers"]

Numbers = Mapping[str, float | int | str]
_NONE: Numbers = MappingProxyType({})


def numbers(**values: float | int | str) -> Numbers:
    """A frozen name -> value map; floats are rounded to 6 places so plans compare and print cleanly."""
    return MappingProxyType({k: (round(v, 6) if isinstance(v, float) else v) for k, v in values.items()})


@dataclass(frozen=True, slots=True)
class ReleaseTarget:
    """One eviction mode's goal in a round: release `resources` (name -> amount) counted by `kind`
    ("request": the pods' requests, "used": their usage). Modes of one round share what was released in the
    same kind, so a pod one mode picked counts toward the next (koordlet's KillAndEvictPods)."""

    mode: str
    kind: str
    resources: Mapping[str, int]

    def describe(self) -> dict[str, Any]:
        return {"mode": self.mode, "kind": self.kind, "resources": dict(self.resources)}


@dataclass(frozen=True, slots=True)
class PlannedEviction:
    """Evict `request`'s pod; `numbers` say why it was picked (its usage, priority, what it frees).

    In a plan with `release_targets`, `mode` is the mode whose candidate list holds this item, `releases`
    what evicting the pod frees ("kind/resource" -> amount, every kind the round counts), and `pending` marks
    a pod already on its way out (evicted within the cool-down, or terminating): it counts as released and
    is never evicted again."""

    request: EvictionRequest
    numbers: Numbers = field(default_factory=lambda: _NONE)
    mode: str = ""
    releases: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    pending: bool = False

    def describe(self) -> dict[str, Any]:
        r = self.request
        out: dict[str, Any] = {"pod": r.key, "uid": r.pod_uid, "reason": r.reason, "message": r.message,
                               "numbers": dict(self.numbers)}
        if self.mode:
            out.update(mode=self.mode, releases=dict(self.releases), pending=self.pending)
        return out


@dataclass(frozen=True, slots=True)
class QoSPlan:
    """One round of one reconciler.

    `summary` is one line for `hookctl qos`; `numbers` the inputs and results of the round's formula;
    `writes` cgroup plans in order (each `CgroupWrite.reason` says why); `evictions` in eviction order;
    `files` node files that are not cgroups (sysctls, resctrl), carried out after `writes` by the daemon's
    system-file executor (hookserver.executor.sysfiles).
    `state` is what the reconciler wants to remember for its next round (cool-down start, last target);
    the runner keeps it only when the plan is carried out (or dry-run), never for a replay.
    `skipped` says why the round did nothing at all (disabled, no data, cooling down).
    """

    reconciler: str
    summary: str
    numbers: Numbers = field(default_factory=lambda: _NONE)
    writes: tuple[ResourcePlan, ...] = ()
    evictions: tuple[PlannedEviction, ...] = ()
    notes: tuple[str, ...] = ()
    skipped: str = ""
    state: object = None
    # Node files that are not cgroups (sysctls, resctrl), in order; carried out after `writes`.
    files: tuple[FileWrite, ...] = ()
    # Eviction rounds across modes (qos.framework.evict_round): each mode's goal, in order. With these, `evictions`
    # are every mode's candidates and `qos.evict_round.walk` decides who goes; without, the runner evicts in
    # plan order until `numbers["release_target"]` is covered.
    release_targets: tuple[ReleaseTarget, ...] = ()
    # `tc` commands on a network interface (hookserver.executor.netcmd), carried out after `files`.
    commands: tuple[NetCommand, ...] = ()
    # Core-scheduling cookie changes (hookserver.executor.coresched), carried out last.
    cookies: tuple[CookieOp, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.writes and not self.evictions and not self.files and not self.commands and not self.cookies

    @classmethod
    def skip(cls, reconciler: str, why: str, *, state: object = None, **values: float | int | str) -> QoSPlan:
        return cls(reconciler=reconciler, summary=f"skipped: {why}", skipped=why, numbers=numbers(**values), state=state)

    def write_count(self) -> int:
        return sum(len(level) for plan in self.writes for level in plan.levels) + len(self.files) + len(self.commands) + len(self.cookies)

    def describe(self, *, max_items: int | None = None) -> dict[str, Any]:
        """JSON-able: `hookctl qos plan` shows all of it; the audit keeps the first `max_items` writes and
        evictions (with the totals), so a busy node's audit stays small."""
        writes = []
        for plan in self.writes:
            for depth, level in enumerate(plan.levels):
                for w in level:
                    writes.append({
                        "cgroup": w.cgroup_dir, "file": w.resource.value, "value": w.value, "level": depth,
                        "leveled": plan.leveled, "reason": w.reason,
                    })
        evictions = [e.describe() for e in self.evictions[:max_items]] if max_items is not None else [
            e.describe() for e in self.evictions]
        out: dict[str, Any] = {
            "reconciler": self.reconciler,
            "summary": self.summary,
            "skipped": self.skipped,
            "numbers": dict(self.numbers),
            "writes": writes[:max_items] if max_items is not None else writes,
            "evictions": evictions,
            "notes": list(self.notes),
            **({"files": [f.describe() for f in self.files]} if self.files else {}),
            **({"commands": [c.describe() for c in self.commands]} if self.commands else {}),
            **({"cookies": [c.describe() for c in self.cookies]} if self.cookies else {}),
            **({"release_targets": [t.describe() for t in self.release_targets]} if self.release_targets else {}),
        }
        if max_items is not None and (len(writes) > max_items or len(self.evictions) > max_items):
            out["writes_total"] = len(writes)
            out["evictions_total"] = len(self.evictions)
        return out


def kernel_part_skip(reconciler: str, state: object, *, read: frozenset[str], part: str, what: str, problem: str,
                     word: str = "unsupported") -> QoSPlan | None:
    """The round's skip when the snapshot did not read `part` of the kernel facts ("<what> not read this round")
    or read that it cannot be used ("<word>: <problem>", the one status line `hookctl qos` shows); else None."""
    if part not in read:
        return QoSPlan.skip(reconciler, f"{what} not read this round", state=state)
    if problem:
        return QoSPlan.skip(reconciler, f"{word}: {problem}", state=state)
    return None
