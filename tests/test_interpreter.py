"""The hot path's isolation from background work in the one interpreter (`hookserver.aio.interpreter`): the
GIL switch interval while serving, set and restored. Behaviour, not time."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hookserver.aio.interpreter import apply_tuning
from hookserver.daemon import Daemon
from tests.readiness import daemon_settings


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


def test_the_daemon_serves_with_the_switch_interval_and_restores_it(tmp_path: Path) -> None:
    settings = daemon_settings(tmp_path, "node-a", standalone=True, hook={
        "socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg"),
        "switch_interval_ms": 0.25,
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
        stop.set()
        await asyncio.wait_for(task, 10)

    try:
        asyncio.run(scenario())
    finally:
        daemon.http.stop()
    assert seen["interval"] == 0.00025
    assert seen["status"] == {"switch_interval_ms": 0.25, "default_switch_interval_ms": round(before * 1000, 3)}
    assert sys.getswitchinterval() == before  # restored when the daemon stopped
