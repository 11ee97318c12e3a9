"""The one "every N seconds until stopped" loop. Collectors, informer resyncs and QoS reconcilers use it.

The sleep wakes on the stop event, so shutdown takes effect at once. Ticks are sharp (on a fixed grid
from the start, skipping missed ticks) so a slow tick does not drift the schedule. A failed tick is
logged, counted and skipped, never fatal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

__all__ = ["run_every", "sleep_or_stop"]

log = logging.getLogger(__name__)


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep up to `seconds`; return True if `stop` was set meanwhile."""
    if seconds <= 0:
        return stop.is_set()
    try:
        async with asyncio.timeout(seconds):
            await stop.wait()
    except TimeoutError:
        return False
    return True


async def run_every(
    interval_s: float,
    tick: Callable[[], Awaitable[None]],
    stop: asyncio.Event,
    *,
    name: str,
    on_error: Callable[[BaseException], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    run_first_immediately: bool = True,
) -> None:
    """Call `tick` every `interval_s` seconds until `stop` is set."""
    if interval_s <= 0:
        raise ValueError(f"{name}: interval must be positive, got {interval_s}")
    start = clock()
    n = 0 if run_first_immediately else 1
    while not stop.is_set():
        delay = start + n * interval_s - clock()
        if delay > 0 and await sleep_or_stop(stop, delay):
            return
        try:
            await tick()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a failed tick is counted and skipped, see module doc
            log.warning("%s: tick failed: %s", name, exc, exc_info=log.isEnabledFor(logging.DEBUG))
            if on_error is not None:
                on_error(exc)
        # Next grid point after now: a tick that overran skips the ticks it missed.
        n = max(n + 1, int((clock() - start) // interval_s) + 1)
