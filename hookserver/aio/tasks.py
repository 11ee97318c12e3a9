"""Named, guarded root tasks: a failure is logged the moment it happens, and a task meant to run until
stopped that returns early is reported, so the daemon can shut down instead of limping on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

__all__ = ["RootTasks"]

log = logging.getLogger(__name__)


class RootTasks:
    def __init__(self, stop: asyncio.Event) -> None:
        self._stop = stop
        self._tasks: dict[str, asyncio.Task[Any]] = {}
        self.failed: dict[str, str] = {}

    def spawn(self, name: str, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro, name=name)
        self._tasks[name] = task
        task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[Any]) -> None:
        name = task.get_name()
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            log.error("root task %s failed: %s", name, exc, exc_info=exc)
            self.failed[name] = f"{type(exc).__name__}: {exc}"
            self._stop.set()
        elif not self._stop.is_set():
            log.error("root task %s returned before shutdown; stopping the daemon", name)
            self.failed[name] = "returned early"
            self._stop.set()

    async def shutdown(self, grace_s: float) -> None:
        """Give tasks `grace_s` to notice the stop event, then cancel the rest and report them."""
        pending = [t for t in self._tasks.values() if not t.done()]
        if not pending:
            return
        done, still = await asyncio.wait(pending, timeout=grace_s)
        for task in still:
            log.warning("root task %s did not stop within %.1fs; cancelling", task.get_name(), grace_s)
            task.cancel()
        if still:
            await asyncio.wait(still, timeout=grace_s)

    def names(self) -> list[str]:
        return sorted(self._tasks)
