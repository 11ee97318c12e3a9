"""The shared reconnect backoff: grows by its factor to the cap, jitters within bounds, resets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookserver.aio import Backoff


def test_grows_to_the_cap_and_resets() -> None:
    backoff = Backoff(initial_s=1.0, max_s=8.0, jitter=0.0)
    assert [backoff.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    assert backoff.attempts == 6
    backoff.reset()
    assert backoff.next_delay() == 1.0 and backoff.attempts == 1


@given(st.floats(min_value=0.0, max_value=1.0), st.integers(min_value=0, max_value=20))
def test_jitter_stays_within_its_bounds(rand: float, steps: int) -> None:
    backoff = Backoff(initial_s=0.5, max_s=30.0, jitter=0.25, rand=lambda: rand)
    base = 0.5
    for _ in range(steps):
        delay = backoff.next_delay()
        assert base * 0.75 - 1e-9 <= delay <= min(base * 1.25, 30.0 * 1.25) + 1e-9
        base = min(30.0, base * 2)


def test_refuses_nonsense_bounds() -> None:
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial_s=0.0, max_s=1.0)
    with pytest.raises(ValueError, match="initial"):
        Backoff(initial_s=2.0, max_s=1.0)
