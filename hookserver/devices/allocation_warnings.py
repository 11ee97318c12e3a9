"""An Event on the pod when koord-scheduler's GPU allocation names a device this node does not have, or one
that is unhealthy (`GPUEnvInject`'s `warning:` in the audit): `kubectl describe pod` then says why a training
job sees fewer GPUs, or a sick one, without anyone reading the agent's audit.

Hooks are pure (no I/O on the hot path), so the hook only names the problem in its decision's reason; this
reader scans the audit every few seconds, off the hot path, and posts one Event per pod and problem. Standalone,
the same line goes to the log.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from hookserver.aio.periodic import run_every
from hookserver.store.state import StateStore

__all__ = ["EVENT_REASON", "AllocationWarnings", "LogEventSink", "PodEventSink"]

log = logging.getLogger(__name__)

EVENT_REASON = "GPUAllocationWarning"
_PLUGIN = "GPUEnvInject"
_MARK = "warning: "
_REMEMBERED = 4096  # (pod, problem) pairs already reported; the oldest are forgotten first


class PodEventSink(Protocol):
    def post(self, *, namespace: str, name: str, uid: str, reason: str, message: str, type_: str = "Warning",
             resource_version: str = "") -> bool: ...


class LogEventSink:
    """No apiserver: the Event's text goes to the log."""

    def post(self, *, namespace: str, name: str, uid: str, reason: str, message: str, type_: str = "Warning",
             resource_version: str = "") -> bool:
        log.warning("%s %s/%s: %s", reason, namespace, name, message)
        return True


def _problem(reason: str) -> str:
    """The hook's warning, without the rest of its reason (`...; warning: minor 5 is not a GPU of this node`)."""
    text = reason[reason.index(_MARK) + len(_MARK):]
    return text.split("; ")[0] if "; warning" in text else text


class AllocationWarnings:
    def __init__(self, store: StateStore, sink: PodEventSink, *, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.sink = sink
        self.interval_s = interval_s
        self._clock = clock
        self._since = 0.0
        self._reported: OrderedDict[tuple[str, str], None] = OrderedDict()
        self.posted = 0
        self.failed = 0

    def tick(self) -> int:
        """Post what is new since the last tick; returns how many Events were posted."""
        records = self.store.audit.decisions_of(_PLUGIN, since=self._since, reason_contains=_MARK)
        posted = 0
        held = False  # after a failed post the cursor stays before it: the next tick sees that record again
        for record in records:
            if not held:
                self._since = max(self._since, record.ts)
            key = (record.pod_uid or record.pod_key, _problem(record.reason))
            if key in self._reported:
                continue
            namespace, _, name = record.pod_key.partition("/")
            message = f"the GPU allocation (scheduling.koordinator.sh/device-allocated) of container " \
                      f"{record.container or '-'}: {key[1]}; NVIDIA_VISIBLE_DEVICES was set as allocated"
            if self.sink.post(namespace=namespace, name=name, uid=record.pod_uid, reason=EVENT_REASON,
                              message=message):
                posted += 1
                self._reported[key] = None
                if len(self._reported) > _REMEMBERED:
                    self._reported.popitem(last=False)
            else:
                self.failed += 1
                if not held:
                    held, self._since = True, record.ts - 1e-6
        self.posted += posted
        return posted

    async def run(self, stop: asyncio.Event) -> None:
        async def tick() -> None:
            await asyncio.to_thread(self.tick)

        await run_every(self.interval_s, tick, stop, name="gpu allocation warnings")
