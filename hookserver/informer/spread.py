"""When this node lists: one phase per node places its first list and every relist a 410 forces.

Every node of a cluster sees an apiserver restart at the same moment and reconnects within seconds of it coming
back; a watch resourceVersion the new watch cache no longer holds answers 410, and each such node must relist.
Without a spread they would all relist in the same second. Each node has one phase in [0, 1) (a hash of its node
name: as uniform over the nodes as a random draw, and the same after an agent restart), shared by all its
reflectors, and a 410 waits for the node's next relist point: the wall-clock moments t with
t mod relist_s = phase x relist_s. The points are fixed on the clock, not anchored at the 410, so however the 410s
of an apiserver restart arrive (one wave as the nodes reconnect, a second one seconds later for a custom resource
whose storage the apiserver rebuilt, retries after a 429 or a refused connection), a node lists at its own point
and nowhere else: the nodes listing in any one second are at most those whose point falls in that second of the
window, relist_s / 1 s of them on average, whatever the timing of the waves. (Anchored at a node's first 410, as
before, a 410 arriving after the node's slot relisted at once, and a second wave expiring a resource of every node
in one second relisted a third of the nodes together: 11 % of 200 nodes in one second with a 30 s window.) The
price: a node stays stale up to relist_s after its last 410. A node's resources come back together (each backs off
on its own, up to 45 s apart after a long outage, so when one reaches the apiserver again the others stop waiting:
`answered`, `backoff`), get their 410s together and so relist at the same point.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import time
from collections.abc import Awaitable, Callable

__all__ = ["ListSpread", "phase_of"]


def phase_of(node_name: str) -> float:
    """This node's phase in [0, 1): its name's SHA-256, so uniform over a cluster's node names and stable."""
    digest = hashlib.sha256(node_name.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


class ListSpread:
    """Shared by one node's reflectors."""

    def __init__(
        self, *, first_list_s: float, relist_s: float, phase: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.phase = random.random() if phase is None else phase
        self._first_list_s = first_list_s
        self._relist_s = relist_s
        # Wall clock: the relist points of all nodes are laid on one time line (NTP keeps the nodes within
        # milliseconds of each other; a clock step moves a point, it never makes a wait longer than relist_s).
        self._clock = clock
        self._sleepers: set[asyncio.Event] = set()  # reflectors of this node backing off (event loop only)

    def first_list_delay(self) -> float:
        """Before the agent's very first list (a DaemonSet rollout or restart starts many agents at once)."""
        return self.phase * self._first_list_s

    def relist_delay(self) -> float:
        """Before a relist forced by a 410: until this node's next relist point (0 when now is one), in
        [0, relist_s). Every 410 of the node waits for it, whenever it came and whatever came before it."""
        if self._relist_s <= 0:
            return 0.0
        delay = (self.phase * self._relist_s - self._clock()) % self._relist_s
        return 0.0 if delay >= self._relist_s else delay  # a float modulo of a tiny negative rounds up to relist_s

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
