"""What one capacity tick decided and what one write did: the records the publisher keeps and its report
reads. Their own module so the report (`report.py`) reads them without importing the publisher, which calls
the report for its standalone document.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hookserver.kubewire import iso_time

__all__ = ["TickOutcome", "WriteRecord"]


@dataclass(frozen=True, slots=True)
class TickOutcome:
    at: float
    state: str  # see metrics.STATES
    reason: str
    action: str = "none"  # none | write | withdraw
    result: str = ""  # the sink's result when it was called
    detail: str = ""
    values: Mapping[str, str] = field(default_factory=dict)  # what was written (write)
    duration_s: float = 0.0


@dataclass(frozen=True, slots=True)
class WriteRecord:
    at: float
    action: str
    reason: str
    result: str
    values: Mapping[str, str]
    detail: str = ""
    forced_from: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"at": iso_time(self.at), "action": self.action, "reason": self.reason, "result": self.result,
                "values": dict(self.values), "detail": self.detail or None,
                "forced_from": list(self.forced_from) or None}
