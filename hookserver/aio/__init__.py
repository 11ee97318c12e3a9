"""asyncio helpers shared by every loop: the periodic runner and the guarded task starter."""

from hookserver.aio.periodic import run_every, sleep_or_stop

__all__ = ["run_every", "sleep_or_stop"]
