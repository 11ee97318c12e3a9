"""Which BE pods may be evicted by a policy, and in which order: koordinator's eviction labels and
annotations, shared by memory and CPU eviction.

* `koordinator.sh/eviction-policy` (annotation): a JSON list of the policies (feature gate names, e.g.
  `["BEMemoryEvict"]`) that may evict the pod; absent means any. An unparsable list means none: a typo
  must not expose a pod its owner meant to protect.
* `koordinator.sh/eviction-priority` (annotation, int32): lower goes first, before spec.priority; absent
  or invalid is 0.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from qos.snapshot.model import ANNOTATION_EVICTION_POLICY, ANNOTATION_EVICTION_PRIORITY, PodFacts

__all__ = ["eviction_allowed", "eviction_priority"]

_INT32 = (-(2**31), 2**31 - 1)


def eviction_allowed(policy: str, annotations: Mapping[str, str]) -> bool:
    raw = annotations.get(ANNOTATION_EVICTION_POLICY)
    if raw is None:
        return True
    try:
        allowed = json.loads(raw)
    except ValueError:
        return False
    return isinstance(allowed, list) and policy in allowed


def eviction_priority(pod: PodFacts) -> int:
    raw = pod.annotations.get(ANNOTATION_EVICTION_PRIORITY)
    if raw is None:
        return 0
    try:
        value = int(raw.strip())
    except ValueError:
        return 0
    return value if _INT32[0] <= value <= _INT32[1] else 0
