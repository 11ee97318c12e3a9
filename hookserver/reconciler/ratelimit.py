"""A token bucket: koordlet limits pod-sync triggered reconciles to 5 per second with a burst of 10."""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """`rate_per_s` tokens a second, at most `burst` saved. Not thread-safe: the reconciler loop owns it."""

    def __init__(self, *, rate_per_s: float, burst: int, clock: Callable[[], float]) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError(f"token bucket needs rate > 0 and burst >= 1, got {rate_per_s}/s, {burst}")
        self._rate = rate_per_s
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now

    def take(self) -> bool:
        """Spend one token if there is one."""
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait_s(self) -> float:
        """Seconds until the next token (0 when one is ready)."""
        self._refill()
        return 0.0 if self._tokens >= 1.0 else (1.0 - self._tokens) / self._rate
