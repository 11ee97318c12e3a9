"""asyncio helpers shared by every loop: the periodic runner and the guarded task starter."""

from hookserver.aio.backoff import Backoff
from hookserver.aio.periodic import run_every, sleep_or_stop
from hookserver.aio.tasks import RootTasks

__all__ = ["Backoff", "RootTasks", "run_every", "sleep_or_stop"]
