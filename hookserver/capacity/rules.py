"""When the offer is written, withdrawn or left alone, and who publishes it. Pure functions of the tick's facts.

Write rules (koord-manager's `IsResourceDiff` and `updateTimeThresholdSeconds`): a resource that appears or
disappears, or moves by more than `resourceDiffThreshold` of its current value, is written at once; otherwise
a changed offer is refreshed once `updateTimeThresholdSeconds` have passed since the last write. An unchanged
offer is never rewritten (koord-manager PUTs it anyway; here that would be a write a node every 5 minutes
for nothing). Shrinking fast and growing slowly is the usage input's job (`inputs.WindowedUsage`), so one
threshold rule serves both directions.

Degrade rules: the agent's own node samples older than `degradeTimeMinutes` (or none since it started that
long ago), or a collector the formula needs switched off, withdraw the offer: a figure nobody can vouch
for must not stay on the Node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hookserver.capacity.usage import Freshness

__all__ = ["Decision", "WhoPublishes", "decide", "degrade_reason", "foreign_owners", "warmup_left_s", "who_publishes"]


@dataclass(frozen=True, slots=True)
class WhoPublishes:
    agent: bool
    why: str


def who_publishes(setting: str, *, standalone: bool, koord_manager_evidence: str) -> WhoPublishes:
    if standalone:
        return WhoPublishes(True, "standalone: the offer goes to the state dir")
    if setting == "agent":
        return WhoPublishes(True, "capacity.publisher: agent")
    if setting == "koord-manager":
        return WhoPublishes(False, "capacity.publisher: koord-manager")
    if koord_manager_evidence:
        return WhoPublishes(False, f"capacity.publisher: auto, and koord-manager runs ({koord_manager_evidence})")
    return WhoPublishes(True, "capacity.publisher: auto, and no koord-manager is seen (no NodeSLO object for "
                              "this node, no other writer of the batch/mid fields)")


def foreign_owners(owners: Mapping[str, tuple[str, ...]], field_manager: str) -> dict[str, tuple[str, ...]]:
    """Resource -> the managers other than ours that own it on the Node."""
    out: dict[str, tuple[str, ...]] = {}
    for resource, managers in owners.items():
        others = tuple(m for m in managers if m != field_manager)
        if others:
            out[resource] = others
    return out


def degrade_reason(
    fresh: Freshness, *, now: float, started_at: float, degrade_minutes: int, disabled_collectors: Sequence[str]
) -> str:
    """Why the offer must be withdrawn now, or "" when the samples can be trusted."""
    if disabled_collectors:
        return "collectors switched off: " + "; ".join(disabled_collectors)
    limit_s = degrade_minutes * 60.0
    if fresh.newest_at is None:
        if now - started_at > limit_s:
            return (f"no node sample since the publisher started {now - started_at:.0f} s ago "
                    f"(degradeTimeMinutes {degrade_minutes})")
        return ""
    age = now - fresh.newest_at
    if age > limit_s:
        return f"the node's own metrics are {age:.0f} s old (degradeTimeMinutes {degrade_minutes})"
    return ""


def warmup_left_s(fresh: Freshness, *, now: float, warmup_s: float) -> float:
    """Seconds of node samples still missing before a first write is allowed (0: enough)."""
    if fresh.first_at is None:
        return warmup_s
    return max(0.0, warmup_s - (now - fresh.first_at))


@dataclass(frozen=True, slots=True)
class Decision:
    action: str  # write | withdraw | hold
    reason: str


def _diff(old: int, new: int, threshold: float) -> bool:
    """koord-manager's IsQuantityDiff: |new - old| > old x threshold (old 0: any new value differs)."""
    return abs(new - old) > old * threshold


def decide(
    target: Mapping[str, int] | None,
    current: Mapping[str, int],
    *,
    ours: Sequence[str],
    last_write_at: float,
    now: float,
    diff_threshold: float,
    update_time_s: float,
) -> Decision:
    """`target` None: the offer must go (withdraw what the Node holds of ours). `ours`: the resources we own."""
    if target is None:
        held = [r for r in ours if r in current]
        if held:
            return Decision("withdraw", "remove " + ", ".join(held))
        return Decision("hold", "nothing of ours on the Node")
    for resource in sorted(set(target) | set(current)):
        if resource not in current:
            return Decision("write", f"{resource} appears")
        if resource not in target:
            return Decision("write", f"{resource} disappears")
    moves = []
    for resource in target:
        old, new = current[resource], target[resource]
        if _diff(old, new, diff_threshold):
            change = (new - old) / old * 100 if old else float("inf")
            moves.append(f"{resource} {old} -> {new} ({change:+.0f} %)")
    if moves:
        return Decision("write", "; ".join(moves) + f" (threshold {diff_threshold:.0%})")
    if dict(target) == dict(current):
        return Decision("hold", "the Node already holds these values")
    since = now - last_write_at if last_write_at else float("inf")
    if since >= update_time_s:
        return Decision("write", f"refresh: {since:.0f} s since the last write (updateTimeThresholdSeconds "
                                 f"{update_time_s:.0f}), values moved within the threshold")
    return Decision("hold", f"within {diff_threshold:.0%} of the Node's values; refresh in "
                            f"{update_time_s - since:.0f} s")
