"""The hot path's isolation from background work in the one interpreter: the GIL switch interval
(`hookserver.aio.interpreter`), the hot gate and the GC pacer, set while the daemon serves and undone when it
stops. Behaviour, not time."""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Callable
from pathlib import Path

from hookserver.aio.hotgate import GATE
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


def while_serving(daemon: Daemon, ready: Callable[[], bool], look: Callable[[], dict[str, object]]) -> dict[str, object]:
    """Run `daemon` until `ready()`, return what `look()` saw while it served, then stop it."""
    seen: dict[str, object] = {}

    async def scenario() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(daemon.run(stop))
        for _ in range(500):
            if ready():
                break
            await asyncio.sleep(0.01)
        seen.update(look())
        stop.set()
        await asyncio.wait_for(task, 10)

    try:
        asyncio.run(scenario())
    finally:
        daemon.http.stop()
    return seen


def test_the_daemon_serves_with_the_switch_interval_and_restores_it(tmp_path: Path) -> None:
    settings = daemon_settings(tmp_path, "node-a", standalone=True, hook={
        "socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg"),
        "switch_interval_ms": 0.25,
    })
    daemon = Daemon(settings)
    before = sys.getswitchinterval()
    seen = while_serving(daemon, lambda: daemon.interpreter is not None, lambda: {
        "interval": sys.getswitchinterval(), "status": daemon.info()["interpreter"],
    })
    assert seen["interval"] == 0.00025
    assert seen["status"] == {"switch_interval_ms": 0.25, "default_switch_interval_ms": round(before * 1000, 3)}
    assert sys.getswitchinterval() == before  # restored when the daemon stopped


def test_the_daemon_serves_with_the_gate_and_the_gc_pacer_and_stops_both(tmp_path: Path) -> None:
    settings = daemon_settings(tmp_path, "node-a", standalone=True, hook={
        "socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg"),
        "yield_linger_ms": 3, "yield_max_defer_ms": 40, "gc_pace_ms": 15, "gc_quiet_wait_ms": 700,
        "gc_deep_every_s": 120,
    })
    daemon = Daemon(settings)
    thresholds = gc.get_threshold()
    seen = while_serving(daemon, lambda: daemon.gc_pacer is not None, lambda: {
        "gate": daemon.info()["hot_gate"], "pacer": daemon.info()["gc_pacer"], "thresholds": gc.get_threshold(),
    })
    gate = seen["gate"]
    assert isinstance(gate, dict)
    assert gate["enabled"] is True and gate["linger_ms"] == 3 and gate["max_defer_ms"] == 40
    pacer = seen["pacer"]
    assert isinstance(pacer, dict) and pacer["running"] is True and pacer["interval_ms"] == 15
    assert pacer["young"] is True  # generation 0 paced too, by default
    assert pacer["quiet_wait_ms"] == 700 and pacer["deep_every_s"] == 120
    assert pacer["freeze_survivors"] is True  # by default
    served = seen["thresholds"]
    # CPython's own generation-0 collection only as the backstop (10x), the older two not at all.
    assert isinstance(served, tuple) and served[0] == 10 * thresholds[0] and served[1] > 10**8
    # Stopped: CPython collects every generation itself again, and background work no longer pauses.
    assert gc.get_threshold() == thresholds
    assert GATE.enabled is False
