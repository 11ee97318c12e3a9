"""Per-hook budgets and breakers: trip on overruns, skip answering "no change" with a reason, half-open
probe after the cool-down, close on a good probe, reopen (longer) on a bad one. Time is a fake clock, and
each hook run "takes" exactly what the test says, so no assertion depends on the machine's speed."""

from __future__ import annotations

import pytest

from hookserver.hooks import BreakerSettings, BreakerState, HookBreakers, HookRegistry, HookResult, PodRequest, Resources, Stage, run_stage
from hookserver.view import NodeView

POD = PodRequest("ns", "p", "uid-1")
STAGE = Stage.PRE_RUN_POD_SANDBOX
SETTINGS = BreakerSettings(budget_s=0.010, trip_after=3, stuck_s=0.5, cool_down_s=30.0, max_cool_down_s=100.0)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Timed:
    """A hook that takes `took` seconds of the fake clock and sets shares (or raises)."""

    def __init__(self, name: str, clock: Clock, shares: int = 512) -> None:
        self.name = name
        self.clock = clock
        self.shares = shares
        self.took = 0.001
        self.raises = False
        self.calls = 0

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        self.calls += 1
        self.clock.now += self.took
        if self.raises:
            raise RuntimeError("slow and broken")
        return HookResult(resources=Resources(cpu_shares=self.shares), reason="set")


@pytest.fixture
def world() -> tuple[Clock, Timed, Timed, HookBreakers, HookRegistry, list[tuple[str, str, str]]]:
    clock = Clock()
    slow, fast = Timed("Slow", clock, 512), Timed("ZFast", clock, 0)
    fast.shares = 0
    changes: list[tuple[str, str, str]] = []
    breakers = HookBreakers(SETTINGS, clock=clock, on_change=lambda p, s, st, why: changes.append((p, st.value, why)))
    return clock, slow, fast, breakers, HookRegistry([slow]), changes


def call(registry: HookRegistry, breakers: HookBreakers, clock: Clock):  # type: ignore[no-untyped-def]
    return run_stage(registry, STAGE, POD, NodeView.build(), clock=clock, breakers=breakers)


def test_three_overruns_in_a_row_trip_and_the_hook_is_skipped_with_a_reason(world) -> None:  # type: ignore[no-untyped-def]
    clock, slow, _fast, breakers, registry, changes = world
    slow.took = 0.020
    for _ in range(2):
        assert call(registry, breakers, clock).resources.cpu_shares == 512
    assert breakers.state("Slow", STAGE) is BreakerState.CLOSED
    assert breakers.needs_guard()  # suspect: an inline caller must protect the next run
    assert call(registry, breakers, clock).resources.cpu_shares == 512  # the third overrun still answers
    assert breakers.state("Slow", STAGE) is BreakerState.OPEN
    assert changes[-1][:2] == ("Slow", "open") and "3 runs in a row over budget" in changes[-1][2]
    calls = slow.calls
    out = call(registry, breakers, clock)
    assert slow.calls == calls  # not run at all
    assert out.resources.is_empty() and not out.failed  # "no change", not an error
    skipped = out.outcomes[0]
    assert skipped.result is not None and not skipped.result.applied
    assert skipped.result.reason.startswith("breaker open: 3 runs in a row over budget")
    assert not breakers.needs_guard()  # open and not due: skipping is instant, inline is safe
    status = breakers.status()
    assert status["open"] == ["Slow/PreRunPodSandbox"]
    assert status["hooks"]["Slow/PreRunPodSandbox"]["skipped_calls"] == 1
    assert status["hooks"]["Slow/PreRunPodSandbox"]["trips"] == 1


def test_an_overrun_between_good_runs_does_not_trip(world) -> None:  # type: ignore[no-untyped-def]
    clock, slow, _fast, breakers, registry, _changes = world
    for took in (0.02, 0.02, 0.001, 0.02, 0.02, 0.001):
        slow.took = took
        call(registry, breakers, clock)
    assert breakers.state("Slow", STAGE) is BreakerState.CLOSED
    assert not breakers.needs_guard()  # the good run cleared the suspicion


def test_one_stuck_run_trips_at_once(world) -> None:  # type: ignore[no-untyped-def]
    clock, slow, _fast, breakers, registry, changes = world
    slow.took = 0.6
    call(registry, breakers, clock)
    assert breakers.state("Slow", STAGE) is BreakerState.OPEN
    assert "one run took 600.0 ms" in changes[-1][2]


def test_half_open_probe_closes_on_a_good_run_and_reopens_longer_on_a_bad_one(world) -> None:  # type: ignore[no-untyped-def]
    clock, slow, _fast, breakers, registry, changes = world
    slow.took = 0.6
    call(registry, breakers, clock)
    clock.now += 29.0
    assert call(registry, breakers, clock).outcomes[0].result.inputs["breaker"] == "open"  # type: ignore[union-attr]
    clock.now += 2.0
    assert breakers.needs_guard()  # a probe is due: run it protected
    slow.took = 0.02
    assert call(registry, breakers, clock).resources.cpu_shares == 512  # the probe runs (and answers)
    assert breakers.state("Slow", STAGE) is BreakerState.OPEN
    assert breakers.status()["hooks"]["Slow/PreRunPodSandbox"]["retry_in_s"] == 60.0  # doubled
    clock.now += 61.0
    slow.took = 0.001
    call(registry, breakers, clock)
    assert breakers.state("Slow", STAGE) is BreakerState.CLOSED
    assert [c[1] for c in changes] == ["open", "open", "closed"]
    assert not breakers.needs_guard()


def test_slow_failures_count_and_other_hooks_keep_running(world) -> None:  # type: ignore[no-untyped-def]
    clock, slow, fast, breakers, _registry, _changes = world
    registry = HookRegistry([slow, fast])
    slow.took, slow.raises = 0.6, True
    first = call(registry, breakers, clock)
    assert first.failed and first.first_error is not None and first.first_error.plugin == "Slow"
    second = call(registry, breakers, clock)
    assert not second.failed  # the broken, slow hook is skipped; the other one still runs
    assert [o.plugin for o in second.outcomes] == ["Slow", "ZFast"] and fast.calls == 2


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="budget"):
        BreakerSettings(budget_s=0)
    with pytest.raises(ValueError, match="trip_after"):
        BreakerSettings(trip_after=0)
