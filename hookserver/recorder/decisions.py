"""What counts as "the decision" of a reconciler's round, computed the same way by the agent (when it records)
and by the replay (when it checks itself against the recording).

A decision is the plan's numbers (the budget, the CPUs or quota BE gets, the release target and the usage
behind it), why it skipped, and which pods the round would evict. It leaves out which cgroup files a round
writes: that depends on what earlier rounds wrote (CPU suppress rewrites only new directories), which is
the executor's business, not the decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from qos.framework.evict_round import walk
from qos.framework.plan import PlannedEviction, QoSPlan

from hookserver.recorder.codec import dumps

__all__ = ["REPLAYED", "Decision", "comparable", "decision_of", "would_evict"]


def would_evict(plan: QoSPlan) -> list[PlannedEviction]:
    """The pods the runner would evict if every eviction went through (its order of work, as `hookctl qos plan`)."""
    if plan.release_targets:
        return walk(plan.release_targets, plan.evictions, lambda item: True).picked()
    target = float(plan.numbers.get("release_target", 0) or 0)
    out: list[PlannedEviction] = []
    covered = 0.0
    for item in plan.evictions:
        if target > 0 and covered >= target:
            break
        covered += float(item.numbers.get("releases", 0) or 0)
        out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class Decision:
    reconciler: str
    skipped: str
    numbers: dict[str, Any]
    evict: tuple[str, ...]  # pod UIDs, in eviction order

    def text(self) -> str:
        return dumps({"skipped": self.skipped, "numbers": self.numbers, "evict": list(self.evict)})

    @classmethod
    def parse(cls, reconciler: str, text: str) -> Decision:
        import json

        body = json.loads(text)
        return cls(reconciler, body["skipped"], body["numbers"], tuple(body["evict"]))


# Numbers that count which files a round writes rather than what it decides: memory QoS re-plans a pod only when
# its inputs changed or its once-a-minute slot comes, so its file count depends on the rounds before (every
# second on the agent), while the totals of memory.min and memory.low it decides do not.
_NOT_DECIDED = {"MemoryQoS": ("files",)}


def decision_of(plan: QoSPlan) -> Decision:
    """The plan's decision. A round the feature gates turned off is "feature gates off" whatever the runner's
    wording (which names where each gate's value came from, something a replay cannot know)."""
    skipped = "feature gates off" if plan.skipped.startswith("feature gate") else plan.skipped
    left_out = _NOT_DECIDED.get(plan.reconciler, ())
    values = {k: v for k, v in plan.numbers.items() if k not in left_out} if left_out else dict(plan.numbers)
    return Decision(plan.reconciler, skipped, values,
                    tuple(e.request.pod_uid for e in would_evict(plan) if not e.pending))

# Numbers a newer agent decides that an older recording's decisions do not hold: compared only where the recorded
# decision has them, so a recording made before they were added still replays as reproduced. memory QoS's
# memory.high total came with the replay of `throttlingPercent` (issue 39).
_ADDED_LATER = {"MemoryQoS": ("high_total",)}


def comparable(mine: Decision, recorded: Decision) -> Decision:
    """`mine` without the numbers the `recorded` decision's agent did not decide yet (`_ADDED_LATER`)."""
    later = [k for k in _ADDED_LATER.get(mine.reconciler, ()) if k in mine.numbers and k not in recorded.numbers]
    if not later:
        return mine
    return Decision(mine.reconciler, mine.skipped, {k: v for k, v in mine.numbers.items() if k not in later}, mine.evict)

# The reconcilers the replay runs (and so the ones whose decisions the recorder keeps).
REPLAYED = ("CPUSuppress", "MemoryEvict", "CPUEvict", "CPUBurst", "MemoryQoS")
