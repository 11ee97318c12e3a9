"""The hot path's isolation from background work in the one interpreter (`hookserver.aio.interpreter`): the
GIL switch interval while serving, and background threads at a lower CPU priority. Behaviour, not time."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

from hookserver.aio.interpreter import apply_tuning, background_thread_setup
from hookserver.daemon import Daemon
from tests.readiness import daemon_settings


def _nice_of_a_thread(initializer: object) -> tuple[int, int]:
    """(nice before, nice after) `initializer` ran in a fresh thread."""
    out: list[int] = []

    def body() -> None:
        tid = threading.get_native_id()
        out.append(os.getpriority(os.PRIO_PROCESS, tid))
        initializer()  # type: ignore[operator]
        out.append(os.getpriority(os.PRIO_PROCESS, tid))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    return out[0], out[1]


def test_switch_interval_is_set_and_restored() -> None:
    before = sys.getswitchinterval()
    tuning = apply_tuning(switch_interval_s=0.0005)
    try:
        assert sys.getswitchinterval() == tuning.switch_interval_s == 0.0005
        assert tuning.previous_switch_interval_s == before
        assert tuning.status() == {"switch_interval_ms": 0.5, "default_switch_interval_ms": round(before * 1000, 3)}
    finally:
        tuning.restore()
    assert sys.getswitchinterval() == before


def test_background_threads_lower_only_their_own_priority() -> None:
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    start, after = _nice_of_a_thread(background_thread_setup(5))
    assert after == min(19, start + 5)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine  # the caller's thread is untouched
    start, after = _nice_of_a_thread(background_thread_setup(0))
    assert after == start


def test_the_daemon_serves_with_the_tuning_and_its_background_threads_niced(tmp_path: Path) -> None:
    settings = daemon_settings(tmp_path, "node-a", standalone=True, hook={
        "socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg"),
        "switch_interval_ms": 0.25, "background_nice": 3,
    })
    daemon = Daemon(settings)
    before = sys.getswitchinterval()
    seen: dict[str, object] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        for _ in range(500):
            if daemon.interpreter is not None:
                break
            await asyncio.sleep(0.01)
        seen["interval"] = sys.getswitchinterval()
        seen["status"] = daemon.info()["interpreter"]
        loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        worker_nice = await asyncio.to_thread(lambda: os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        seen["niced_by"] = worker_nice - loop_nice
        stop.set()
        await asyncio.wait_for(task, 10)

    try:
        asyncio.run(scenario())
    finally:
        daemon.http.stop()
    assert seen["interval"] == 0.00025
    assert seen["status"] == {"switch_interval_ms": 0.25, "default_switch_interval_ms": round(before * 1000, 3)}
    assert seen["niced_by"] == 3  # asyncio.to_thread runs on the daemon's background executor
    assert sys.getswitchinterval() == before  # restored when the daemon stopped
