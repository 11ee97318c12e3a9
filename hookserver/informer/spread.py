"""When this node lists: one random phase per node places its first list and its relists after an outage.

Every node of a cluster sees an apiserver restart at the same moment and reconnects within seconds of it coming
back; a watch resourceVersion the new watch cache no longer holds answers 410, and each such node must relist.
Without a spread they would all relist in the same second, with a spread drawn per resource a node would relist
its five resources at five moments. So each node draws one phase in [0, 1) and all its reflectors share it, and
the relist slot is anchored at the node's first 410 of an outage: its resources relist together, at
anchor + phase x window, and the nodes are spread evenly over the window.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

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
