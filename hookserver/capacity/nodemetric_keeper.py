"""The NodeMetric lifecycle without koord-manager: create this node's NodeMetric, keep its spec in step.

koord-manager creates one NodeMetric per node (spec = the collect policy of colocation-config) and koordlet
only updates its status; with no koord-manager nothing is ever reported. When colocation is on for the node,
the keeper hands the rendered spec to the informer's server-side-apply writer (created when missing, our
fields kept in step, a spec another field manager owns never rewritten) only when the spec changed or the
object is missing, so a steady node makes no request at all. Failures are retried after `retry_s`; a conflict
(another writer owns the spec) is reported and left alone until the spec changes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from hookserver.kubewire import iso_time

__all__ = ["NodeMetricKeeper", "SpecWriter"]

log = logging.getLogger(__name__)

_OK = frozenset({"created", "updated", "unchanged"})


class SpecResult(Protocol):
    @property
    def result(self) -> str: ...  # created | updated | unchanged | conflict | not_found | forbidden | error

    @property
    def detail(self) -> str: ...

    @property
    def conflicts(self) -> tuple[tuple[str, str], ...]: ...


class SpecWriter(Protocol):
    where: str

    def ensure(self, spec: Mapping[str, Any]) -> SpecResult: ...


class NodeMetricKeeper:
    def __init__(
        self, writer: SpecWriter, *, watched: bool, retry_s: float = 60.0, conflict_retry_s: float = 600.0,
        on_result: Callable[[str], None] | None = None, clock: Callable[[], float] = time.time,
    ) -> None:
        self.writer = writer
        self.watched = watched  # the informer watches NodeMetric: `exists` is known
        self.retry_s = retry_s
        self.conflict_retry_s = conflict_retry_s
        self.on_result = on_result
        self.clock = clock
        self.last_spec: dict[str, Any] | None = None
        self.last_result = ""
        self.last_detail = ""
        self.last_at = 0.0
        self.next_try_at = 0.0
        self.calls = 0

    def keep(self, spec: Mapping[str, Any], *, exists: bool) -> None:
        """Make the NodeMetric carry `spec`. `exists`: whether the informer's NodeMetric watch has the object
        (ignored when it does not watch NodeMetric: then only our own last result tells)."""
        now = self.clock()
        wanted = dict(spec)
        same = wanted == self.last_spec
        if same and self.last_result in _OK and (exists or not self.watched):
            return
        if same and self.last_result and self.last_result not in _OK and now < self.next_try_at:
            return
        delivery = self.writer.ensure(wanted)
        self.calls += 1
        changed_state = delivery.result != self.last_result
        self.last_spec, self.last_result, self.last_detail, self.last_at = wanted, delivery.result, delivery.detail, now
        if delivery.result == "conflict":
            owners = ", ".join(sorted({m for m, _ in delivery.conflicts})) or "another field manager"
            self.last_detail = f"the spec is owned by {owners}; left alone ({delivery.detail})"
            self.next_try_at = now + self.conflict_retry_s
        elif delivery.result not in _OK:
            self.next_try_at = now + self.retry_s
        if changed_state:
            level = logging.INFO if delivery.result in _OK else logging.WARNING
            log.log(level, "NodeMetric %s: %s%s", self.writer.where, delivery.result,
                    f": {self.last_detail}" if self.last_detail else "")
        if self.on_result is not None:
            self.on_result(delivery.result)

    def view(self) -> dict[str, Any]:
        return {"where": self.writer.where, "spec": self.last_spec, "last_result": self.last_result or None,
                "last_detail": self.last_detail or None, "last_at": iso_time(self.last_at), "calls": self.calls,
                "next_try_at": iso_time(self.next_try_at) if self.last_result not in _OK else None}
