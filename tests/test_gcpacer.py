"""The GC pacer (`hookserver.aio.gcpacer`): the pacer takes generations 1 and 2 (and with `young` generation 0,
CPython's own kept as a backstop) over while serving, collects them when CPython would have (after the hot gate lets it), spaces full ones,
and gives the thresholds back on stop."""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Iterator

import pytest

from hookserver.aio.gcpacer import CollectionHold, GcPacer, generation_due
from hookserver.aio.hotgate import GATE, HotGate


@pytest.fixture
def thresholds() -> Iterator[tuple[int, ...]]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    try:
        yield gc.get_threshold()
    finally:
        gc.set_threshold(*saved)


@pytest.mark.parametrize(("counts", "full_allowed", "due"), [
    ((5000, 0, 0), True, None),      # generation 0 is CPython's own: never the pacer's
    ((0, 9, 9), True, None),
    ((0, 10, 0), True, 1),
    ((0, 10, 10), True, 2),
    ((0, 10, 10), False, 1),         # a full one too soon after the last: generation 1 only
    ((0, 3, 10), True, 2),
    ((0, 3, 10), False, None),
])
def test_the_generation_due_follows_cpythons_thresholds(
    counts: tuple[int, int, int], full_allowed: bool, due: int | None,
) -> None:
    assert generation_due(counts, (700, 10, 10), full_allowed=full_allowed) == due


@pytest.mark.parametrize(("counts", "due"), [
    ((699, 0, 0), None),
    ((700, 0, 0), 0),                # young: generation 0 once CPython's threshold is crossed
    ((5000, 10, 0), 1),              # an older generation due takes the young one with it
    ((5000, 10, 10), 2),
])
def test_young_pacing_also_collects_generation_0_when_cpython_would_have(
    counts: tuple[int, int, int], due: int | None,
) -> None:
    assert generation_due(counts, (700, 10, 10), full_allowed=True, young=True) == due


def test_young_pacing_keeps_cpythons_generation_0_only_as_a_backstop(thresholds: tuple[int, ...]) -> None:
    pacer = GcPacer(interval_s=60.0, young=True, backstop=10)
    pacer.start()
    try:
        assert gc.get_threshold()[0] == 7000  # bursts are still collected in bounded pieces
        assert pacer.thresholds == (700, 10, 10)  # the pacer's own schedule is CPython's
        gc.collect()
        garbage = []
        for _ in range(800):  # cycles: only a collection frees them
            cycle: list[object] = []
            cycle.append(cycle)
            garbage.append(cycle)
        del garbage, cycle
        assert gc.get_count()[0] >= 700  # CPython left them to the pacer
        assert pacer.step() == 0
        assert gc.get_count()[0] < 700
        assert pacer.status()["young"] is True and pacer.status()["collections"][0] == 1
    finally:
        pacer.stop()
    assert gc.get_threshold() == (700, 10, 10)


def test_a_backstop_under_2_is_refused() -> None:
    with pytest.raises(ValueError, match="backstop"):
        GcPacer(young=True, backstop=1)


def test_start_takes_generations_1_and_2_over_and_stop_gives_them_back(thresholds: tuple[int, ...]) -> None:
    pacer = GcPacer(interval_s=60.0)  # its thread looks only once a minute: this test steps it by hand
    pacer.start()
    try:
        t0, t1, t2 = gc.get_threshold()
        assert t0 == 700  # CPython still collects generation 0 itself
        assert t1 > 10**8 and t2 > 10**8
        assert pacer.thresholds == (700, 10, 10)
        assert pacer.status()["running"] is True
    finally:
        pacer.stop()
    assert gc.get_threshold() == (700, 10, 10)
    assert pacer.status()["running"] is False


def test_a_step_collects_the_generation_cpython_would_have(thresholds: tuple[int, ...]) -> None:
    clock = [0.0]
    pacer = GcPacer(interval_s=60.0, full_every_s=30.0, clock=lambda: clock[0])
    pacer.start()
    try:
        gc.collect()  # every count back to 0
        assert pacer.step() is None
        for _ in range(10):
            gc.collect(0)  # ten generation-0 collections: generation 1 is due
        assert gc.get_count()[1] >= 10
        assert pacer.step() == 1
        assert gc.get_count()[1] == 0
        for _ in range(10):
            gc.collect(1)  # ten generation-1 collections: a full one is due
        clock[0] = 100.0
        assert pacer.step() == 2
        assert gc.get_count()[2] == 0
        for _ in range(10):
            gc.collect(1)
        clock[0] = 110.0  # only 10 s after the last full one: not yet
        assert pacer.step() is None
        clock[0] = 131.0
        assert pacer.step() == 2
        assert pacer.status()["collections"] == [0, 1, 2]
    finally:
        pacer.stop()


def test_a_due_collection_waits_at_the_gate_while_a_call_is_in_flight(thresholds: tuple[int, ...]) -> None:
    gate = HotGate()
    gate.configure(enabled=True, linger_s=0.0, max_defer_s=5.0)
    door = gate.door("nri", threadsafe=False)
    order: list[str] = []

    def pause() -> None:
        order.append("paused")
        door.leave()

    gate.pause = pause  # type: ignore[method-assign]
    pacer = GcPacer(interval_s=60.0, gate=gate)
    pacer.start()
    try:
        for _ in range(10):
            gc.collect(0)
        door.enter()
        assert pacer.step() == 1
        assert order == ["paused"]
        assert pacer.status()["deferred_by_hooks"] == 1
    finally:
        pacer.stop()


class _Calls:
    """A gate with one door, and a pause that records itself (and may end the call, as a quiet moment would)."""

    def __init__(self, *, leave_on_pause: bool = False) -> None:
        self.gate = HotGate()
        self.gate.configure(enabled=True, linger_s=0.0, max_defer_s=5.0)
        self.door = self.gate.door("nri", threadsafe=False)
        self.paused = 0
        self._leave = leave_on_pause

        def pause(max_defer_s: float | None = None) -> None:
            self.paused += 1
            if self._leave and self.door.in_flight:
                self.door.leave()

        self.gate.pause = pause  # type: ignore[method-assign]


def _ten(generation: int) -> None:
    for _ in range(10):
        gc.collect(generation)


def test_a_due_older_generation_waits_for_a_quiet_look_without_blocking_the_pacer(thresholds: tuple[int, ...]) -> None:
    calls = _Calls()
    clock = [0.0]
    pacer = GcPacer(interval_s=60.0, quiet_wait_s=1.0, gate=calls.gate, clock=lambda: clock[0])
    pacer.start()
    try:
        _ten(0)  # generation 1 is due
        calls.door.enter()  # a call in flight
        for at in (0.0, 0.3, 0.9):
            clock[0] = at
            assert pacer.step() is None  # put off, and the pacer's thread did not wait at the gate
        assert calls.paused == 0 and gc.get_count()[1] >= 10
        calls.door.leave()
        clock[0] = 0.95
        assert pacer.step() == 1  # the first quiet look collects it
        assert calls.paused == 0 and gc.get_count()[1] == 0
        assert pacer.status()["deferred_by_hooks"] == 1 and pacer.status()["waited_past_quiet"] == 0
    finally:
        pacer.stop()


def test_an_older_generation_put_off_past_the_quiet_wait_waits_at_the_gate_as_before(
    thresholds: tuple[int, ...],
) -> None:
    calls = _Calls(leave_on_pause=True)
    clock = [0.0]
    pacer = GcPacer(interval_s=60.0, quiet_wait_s=1.0, gate=calls.gate, clock=lambda: clock[0])
    pacer.start()
    try:
        _ten(0)
        calls.door.enter()
        assert pacer.step() is None
        clock[0] = 1.0  # a stream of calls with no quiet look for the whole wait
        assert pacer.step() == 1
        assert calls.paused == 1  # the gate's own bounded wait, then the collection
        assert pacer.status()["waited_past_quiet"] == 1
        # The next one due starts its own wait.
        _ten(0)
        calls.door.enter()
        clock[0] = 1.5
        assert pacer.step() is None
    finally:
        pacer.stop()


@contextlib.contextmanager
def _young_pacer_in_a_call() -> Iterator[tuple[_Calls, list[float], GcPacer]]:
    """A pacer of every generation (backstop 10x, quiet wait 1 s) on a clock the test moves, a call in flight."""
    calls = _Calls(leave_on_pause=False)
    clock = [0.0]
    pacer = GcPacer(interval_s=60.0, young=True, backstop=10, quiet_wait_s=1.0, gate=calls.gate,
                    clock=lambda: clock[0])
    pacer.start()
    try:
        gc.collect()
        calls.door.enter()
        yield calls, clock, pacer
    finally:
        pacer.stop()


def test_a_due_generation_0_waits_for_quiet_too_until_half_way_to_the_backstop(thresholds: tuple[int, ...]) -> None:
    with _young_pacer_in_a_call() as (calls, clock, pacer):
        young = [[] for _ in range(800)]  # generation 0 past its threshold (700), far from the backstop (7000)
        assert pacer.step() is None and calls.paused == 0  # put off: a call is in flight
        calls.door.leave()
        assert pacer.step() == 0 and calls.paused == 0  # the first quiet look
        _ten(0)  # generation 1 due as well
        calls.door.enter()
        young += [[] for _ in range(3600)]  # and generation 0 half-way to the backstop
        assert gc.get_count()[0] >= 3500
        assert pacer.step() == 0  # the young alone, after the gate's bounded wait, before CPython's own takes it
        assert calls.paused == 1 and gc.get_count()[0] < 700
        assert gc.get_count()[1] >= 10  # the older one still waits for quiet
        assert pacer.step() is None
        calls.door.leave()
        clock[0] = 0.1
        assert pacer.step() == 1
        assert len(young) == 4400


def test_under_a_hold_generation_0_waits_for_quiet_whatever_its_count(thresholds: tuple[int, ...]) -> None:
    """An NRI sync holds automatic collection while it answers: there is no backstop to beat, and a collection
    would walk the answer's own objects."""
    with _young_pacer_in_a_call() as (calls, clock, pacer):
        with held():
            young = [[] for _ in range(5000)]  # past half the backstop
            assert pacer.step() is None and calls.paused == 0
            clock[0] = 1.0  # a hold as long as the quiet wait: collected, after the gate's bounded wait
            assert pacer.step() == 0 and calls.paused == 1
        assert pacer.status()["waited_past_quiet"] == 1 and len(young) == 5000


@pytest.fixture
def unfrozen_after() -> Iterator[None]:
    """Tests that freeze objects: the process's permanent generation is put back if it was empty before."""
    frozen_before = gc.get_freeze_count()
    try:
        yield
    finally:
        if frozen_before == 0:
            gc.unfreeze()


class _Node:
    """A weakly referenceable object, tracked by the collector."""

    def __init__(self) -> None:
        self.other: object = None


def test_survivors_of_a_full_collection_are_frozen_and_a_deep_one_frees_their_cycles(
    thresholds: tuple[int, ...], unfrozen_after: None,
) -> None:
    clock = [1000.0]
    pacer = GcPacer(interval_s=60.0, full_every_s=30.0, freeze_survivors=True, deep_every_s=600.0,
                    gate=HotGate(), clock=lambda: clock[0])
    pacer.start()  # at 1000: the start-up heap counts as deep-collected
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle, alive for now
        gone = weakref.ref(a)
        _ten(1)
        clock[0] = 1040.0
        assert pacer.step() == 2
        assert all(x is not a for x in gc.get_objects(generation=2))  # frozen: the next full one skips it
        frozen = gc.get_freeze_count()
        assert frozen > 0
        del a, b  # now cyclic garbage, but frozen
        _ten(1)
        clock[0] = 1080.0
        assert pacer.step() == 2
        assert gone() is not None  # a plain full collection does not walk the frozen
        _ten(1)
        clock[0] = 1700.0  # past deep_every_s since start
        assert pacer.step() == 2
        assert gone() is None  # the deep one unfroze, collected the cycle, and froze what lived
        assert gc.get_freeze_count() > 0
        assert pacer.status()["deep_collections"] == 1
    finally:
        pacer.stop()


def test_without_freezing_survivors_a_full_collection_leaves_the_permanent_generation_alone(
    thresholds: tuple[int, ...], unfrozen_after: None,
) -> None:
    clock = [0.0]
    pacer = GcPacer(interval_s=60.0, gate=HotGate(), clock=lambda: clock[0])
    pacer.start()
    try:
        frozen = gc.get_freeze_count()
        alive = _Node()
        _ten(1)
        clock[0] = 100.0
        assert pacer.step() == 2
        assert gc.get_freeze_count() == frozen
        assert any(x is alive for x in gc.get_objects(generation=2))
    finally:
        pacer.stop()


def test_pacer_settings_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="quiet_wait_s"):
        GcPacer(quiet_wait_s=-1.0)
    with pytest.raises(ValueError, match="deep_every_s"):
        GcPacer(deep_every_s=0.0)


@contextlib.contextmanager
def held() -> Iterator[None]:
    hold = CollectionHold()
    hold.hold()
    try:
        yield
    finally:
        hold.release()


def test_a_hold_turns_automatic_collection_off_until_the_last_holder_releases() -> None:
    assert gc.isenabled()
    with held():
        assert not gc.isenabled()
        with held():  # another holder: one hold
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_hold_leaves_collection_off_when_it_was_off_before() -> None:
    gc.disable()
    try:
        with held():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_holds_from_two_threads_end_with_the_last() -> None:
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with held():
            entered.set()
            release.wait(5)

    thread = threading.Thread(target=other)
    thread.start()
    assert entered.wait(5)
    with held():
        pass
    assert not gc.isenabled()  # the other thread still holds
    release.set()
    thread.join(5)
    assert gc.isenabled()


def test_an_exception_inside_a_hold_still_ends_it() -> None:
    with pytest.raises(RuntimeError):
        with held():
            raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_hold_is_released_once_whatever_its_holder_calls() -> None:
    first, second = CollectionHold(), CollectionHold()
    first.hold()
    first.hold()  # idempotent: still one hold
    second.hold()
    first.release()
    first.release()  # idempotent: does not release the second's
    assert not gc.isenabled() and second.holding and not first.holding
    second.release()
    assert gc.isenabled()


def test_a_release_that_collects_waits_at_the_gate_then_collects_generation_0(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[str] = []
    monkeypatch.setattr(GATE, "pause", lambda: seen.append("pause"))
    hold = CollectionHold()
    hold.hold()
    try:
        young = [[] for _ in range(5000)]  # young objects the hold keeps from being collected
        assert gc.get_count()[0] >= 5000
        hold.release(collect=True)
        assert seen == ["pause"] and gc.get_count()[0] < 100 and gc.isenabled()
        assert len(young) == 5000
    finally:
        hold.release()
