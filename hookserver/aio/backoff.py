"""Exponential backoff with jitter, reset after a success: how every reconnecting loop retries (informer, NRI).

Jitter spreads the reconnects of a DaemonSet's agents after an apiserver restart, so thousands of nodes
do not relist in the same second.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    def __init__(
        self,
        *,
        initial_s: float,
        max_s: float,
        factor: float = 2.0,
        jitter: float = 0.2,
        rand: Callable[[], float] = random.random,
    ) -> None:
        if initial_s <= 0 or max_s < initial_s:
            raise ValueError(f"backoff needs 0 < initial ({initial_s}) <= max ({max_s})")
        self._initial = initial_s
        self._max = max_s
        self._factor = factor
        self._jitter = jitter
        self._rand = rand
        self._next = initial_s
        self.attempts = 0

    def next_delay(self) -> float:
        """The delay before the next attempt: base × (1 ± jitter), base growing by `factor` to `max`."""
        base = self._next
        self._next = min(self._max, self._next * self._factor)
        self.attempts += 1
        spread = base * self._jitter * (2 * self._rand() - 1)
        return max(0.0, min(self._max * (1 + self._jitter), base + spread))

    def reset(self) -> None:
        self._next = self._initial
        self.attempts = 0
