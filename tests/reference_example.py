"""Shared test data: the reference §4.5 worked example, and an executor that only records plans.

The annotation key and label are written out literally (not imported from hookserver), so a rename
in the product would fail the tests instead of silently following along. Container a's CPU limit is
"1k": koord-manager serialises 1000 in Go's canonical quantity form, so every test parses it.
"""

from __future__ import annotations

import json
from typing import Any

from hookserver.executor.plan import ApplyReport, ResourcePlan

__all__ = ["BE_LABELS", "PlanRecorder", "SPEC_KEY", "WORKED_SPEC", "WORKED_SPEC_JSON"]

SPEC_KEY = "node.koordinator.sh/extended-resource-spec"
BE_LABELS = {"koordinator.sh/qosClass": "BE"}

# Expected (reference §4.5): pod 2048 / 300000 / 3221225472; a 512 / 100000 / 1Gi; b 1536 / 200000 / 2Gi.
WORKED_SPEC: dict[str, Any] = {
    "containers": {
        "a": {
            "requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
            "limits": {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "1Gi"},
        },
        "b": {
            "requests": {"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "2Gi"},
            "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"},
        },
    }
}
WORKED_SPEC_JSON = json.dumps(WORKED_SPEC)


class PlanRecorder:
    """An executor that records every plan and writes nothing (for tests that never touch cgroups)."""

    def __init__(self) -> None:
        self.plans: list[ResourcePlan] = []

    def apply(self, plan: ResourcePlan) -> ApplyReport:
        self.plans.append(plan)
        return ApplyReport()
