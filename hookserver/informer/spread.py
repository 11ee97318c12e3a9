"""When this node lists: one random phase per node places its first list and its relists after an outage.

Every node of a cluster sees an apiserver restart at the same moment and reconnects within seconds of it coming
back; a watch resourceVersion the new watch cache no longer holds answers 410, and each such node must relist.
Without a spread they would all relist in the same second, with a spread drawn per resource a node would relist
its five resources at five moments. So each node draws one phase in [0, 1) and all its reflectors share it, and
the relist slot is anchored at the node's first 410 of an outage: its resources relist together, at
anchor + phase x window, and the nodes are spread evenly over the window. For that the node's resources must
also come back together: each backs off on its own (up to 45 s apart after a long outage), so when one of them
reaches the apiserver again the others stop waiting and reconnect too (`answered`, `wake_on_answer`).
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections.abc import Awaitable, Callable

__all__ = ["ListSpread"]


class ListSpread:
    """Shared by one node's reflectors."""

    def __init__(
        self, *, first_list_s: float, relist_s: float, phase: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.phase = random.random() if phase is None else phase
        self._first_list_s = first_list_s
        self._relist_s = relist_s
        self._clock = clock
        self._lock = threading.Lock()
        self._anchor: float | None = None
        self._sleepers: set[asyncio.Event] = set()  # reflectors of this node backing off (event loop only)

    def first_list_delay(self) -> float:
        """Before the agent's very first list (a DaemonSet rollout or restart starts many agents at once)."""
        return self.phase * self._first_list_s

    def relist_delay(self) -> float:
        """Before a relist forced by an outage. The first reflector of the node to need one anchors the slot;
        the others wait for the same slot, or relist at once if they come back after it. An anchor older than
        the window (plus a minute of reconnecting) belongs to an earlier outage and is replaced."""
        now = self._clock()
        with self._lock:
            if self._anchor is None or now - self._anchor > self._relist_s + 60:
                self._anchor = now
            return max(0.0, self._anchor + self.phase * self._relist_s - now)

    def outage(self) -> None:
        """A reflector of this node could not reach the apiserver: an anchor set before (a 410 from an apiserver
        that was shutting down) belongs to no slot anyone can keep; the next 410, from the apiserver that came
        back, anchors afresh. Else every node whose slot fell inside the outage relisted the moment it returned."""
        with self._lock:
            self._anchor = None

    def answered(self) -> None:
        """A reflector of this node reached the apiserver (a watch opened): the others stop backing off. Called on
        the event loop."""
        for event in list(self._sleepers):
            event.set()

    async def backoff(self, stop: asyncio.Event, delay: float,
                      sleep: Callable[[asyncio.Event, float], Awaitable[bool]]) -> bool:
        """Wait out a retry delay through `sleep`, or less when another reflector of this node reaches the apiserver
        first. True when `stop` is set."""
        wake = asyncio.Event()
        self._sleepers.add(wake)
        relay = asyncio.ensure_future(stop.wait())
        relay.add_done_callback(lambda _f: wake.set())
        try:
            await sleep(wake, delay)
        finally:
            self._sleepers.discard(wake)
            relay.cancel()
        return stop.is_set()
