"""HealthState on its own: readiness is the AND of named checks; liveness pings the loop."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.observability import HealthState


@given(st.dictionaries(st.text(min_size=1, max_size=6), st.booleans(), max_size=8))
def test_ready_exactly_when_every_check_is(checks: dict[str, bool]) -> None:
    health = HealthState()
    for name, ready in checks.items():
        health.set_ready(name, ready, "" if ready else f"{name} down")
    ready, listed = health.readiness()
    assert ready == all(checks.values())
    assert [c.name for c in listed] == sorted(checks)
    assert {c.name: c.reason for c in listed if not c.ready} == {n: f"{n} down" for n, r in checks.items() if not r}


def test_required_checks_start_not_ready() -> None:
    health = HealthState(required=("proxy", "nri"))
    assert health.readiness()[0] is False
    health.set_ready("proxy", True)
    assert health.readiness()[0] is False
    health.set_ready("nri", True)
    assert health.readiness()[0] is True


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="name"):
        HealthState().set_ready("", True)
    with pytest.raises(ValueError, match="loop_timeout_s"):
        HealthState(loop_timeout_s=0)


def test_liveness_from_another_thread_sees_a_running_loop() -> None:
    health = HealthState(loop_timeout_s=1.0)

    async def probe() -> tuple[bool, str]:
        health.attach_loop(asyncio.get_running_loop())
        # The probe runs on an HTTP thread while the loop is free to answer it.
        return await asyncio.to_thread(health.liveness)

    assert asyncio.run(probe()) == (True, "ok")
    assert health.liveness() == (False, "event loop is closed")
