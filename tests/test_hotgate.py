"""The hot gate (`hookserver.aio.hotgate`): background loops step aside while a hook is answered, never for
longer than the bound, and never on a thread that serves hooks. Behaviour with a fake clock and sleep where
the order matters, real threads where the point is that one thread waits for another."""

from __future__ import annotations

import threading
import time

import pytest

from hookserver.aio.hotgate import HotGate


class FakeTime:
    """A clock that only moves when the gate sleeps, so every wait is exact and instant."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self.on_sleep: list[object] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for hook in list(self.on_sleep):
            hook()  # type: ignore[operator]


def gate(fake: FakeTime, **kw: float) -> HotGate:
    g = HotGate(clock=fake.clock, sleep=fake.sleep, poll_s=0.005, **kw)
    g.configure(enabled=True, linger_s=kw.get("linger_s", 0.002), max_defer_s=kw.get("max_defer_s", 0.05))
    return g


def test_a_quiet_gate_never_sleeps() -> None:
    fake = FakeTime()
    g = gate(fake)
    for _ in range(100):
        g.pause()
    assert fake.sleeps == []
    assert g.pauses == 0


def test_a_call_in_flight_holds_background_work_until_it_is_answered_and_the_linger_has_passed() -> None:
    fake = FakeTime()
    g = gate(fake, linger_s=0.002)
    door = g.door("nri", threadsafe=False)
    door.enter()
    answered_at: list[float] = []

    def answer_after_three_sleeps() -> None:
        if len(fake.sleeps) == 3 and door.in_flight:
            door.leave()
            answered_at.append(fake.now)

    fake.on_sleep.append(answer_after_three_sleeps)
    g.pause()
    assert answered_at, "the pause returned while the call was still in flight"
    # It returned only once the linger after the answer was over, and never later than the bound.
    assert fake.now >= answered_at[0] + 0.002
    assert fake.now <= 100.0 + 0.05 + 1e-9
    assert g.pauses == 1 and g.bound_reached == 0
    assert door.calls == 1 and door.in_flight == 0


def test_a_paused_thread_looks_less_often_the_longer_the_calls_go_on() -> None:
    fake = FakeTime()
    g = gate(fake, max_defer_s=1.0)
    g.door("nri", threadsafe=False).enter()  # a long stream
    g.pause()
    naps = fake.sleeps[:5]
    assert naps == sorted(naps) and naps[-1] >= 8 * naps[0]
    assert len(fake.sleeps) <= 10  # about log2(1 s / 5 ms) looks, not 200


def test_a_stream_of_calls_delays_background_work_by_at_most_the_bound() -> None:
    fake = FakeTime()
    g = gate(fake, max_defer_s=0.05)
    door = g.door("proxy", threadsafe=True)
    door.enter()  # never answered: a stream that does not end
    g.pause()
    assert 0.05 - 1e-9 <= fake.now - 100.0 < 0.05 + 0.005
    assert g.bound_reached == 1
    assert g.stats()["bound_reached"] == 1


def test_the_linger_after_a_call_is_honoured_and_then_work_goes_on() -> None:
    fake = FakeTime()
    g = gate(fake, linger_s=0.002)
    door = g.door("nri", threadsafe=False)
    door.enter()
    door.leave()
    assert g.busy()
    g.pause()
    assert fake.now - 100.0 >= 0.002
    assert not g.busy()
    slept = len(fake.sleeps)
    g.pause()
    assert len(fake.sleeps) == slept  # quiet again: no sleep


def test_a_disabled_gate_and_an_exempt_thread_never_pause() -> None:
    fake = FakeTime()
    g = gate(fake)
    g.door("nri", threadsafe=False).enter()
    g.exempt_current_thread()
    g.pause()
    assert fake.sleeps == []
    g.configure(enabled=False, linger_s=0.002, max_defer_s=0.05)
    g.pause()
    assert fake.sleeps == []
    # Disabling also forgot the exempt thread: enabled again, this thread pauses like any other.
    g.configure(enabled=True, linger_s=0.002, max_defer_s=0.05)
    g.pause()
    assert fake.sleeps


def test_paced_pauses_before_each_item_or_each_nth() -> None:
    calls: list[int] = []
    g = HotGate()
    g.pause = lambda: calls.append(1)  # type: ignore[method-assign]
    assert list(g.paced(range(5))) == [0, 1, 2, 3, 4]
    assert len(calls) == 5
    calls.clear()
    assert list(g.paced(range(10), every=4)) == list(range(10))
    assert len(calls) == 3  # before items 0, 4 and 8


def test_a_background_thread_does_not_progress_while_a_call_is_in_flight() -> None:
    """Real threads and real time: the worker steps through items at the gate; while the door is held it
    stays where it is, and it finishes once the door is left."""
    g = HotGate(poll_s=0.001)
    g.configure(enabled=True, linger_s=0.001, max_defer_s=5.0)
    door = g.door("nri", threadsafe=False)
    done: list[int] = []
    door.enter()
    worker = threading.Thread(target=lambda: done.extend(g.paced(range(50))))
    worker.start()
    time.sleep(0.1)
    assert done == []  # held at the first item for as long as the call was in flight
    door.leave()
    worker.join(5)
    assert done == list(range(50))
    assert g.pauses >= 1 and g.paused_s >= 0.09


def test_a_threadsafe_door_counts_exactly_under_concurrent_calls() -> None:
    g = HotGate()
    door = g.door("proxy", threadsafe=True)

    def calls() -> None:
        for _ in range(20000):
            door.enter()
            door.leave()

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert door.in_flight == 0
    assert door.calls == 80000


@pytest.mark.parametrize("name", ["nri", "proxy"])
def test_a_door_is_made_once_and_kept(name: str) -> None:
    g = HotGate()
    assert g.door(name, threadsafe=True) is g.door(name, threadsafe=True)
    assert g.stats()["calls"] == {name: 0}


def test_pausing_threads_never_see_the_doors_change_under_them() -> None:
    """A door made while background threads look at the gate (the NRI plugin's first connection while the
    collectors already run) must not fail them with 'dictionary changed size during iteration'."""
    g = HotGate(poll_s=0.0001)
    g.configure(enabled=True, linger_s=0.0, max_defer_s=0.001)
    errors: list[BaseException] = []
    stop = threading.Event()

    def look() -> None:
        try:
            while not stop.is_set():
                g.busy()
        except BaseException as exc:  # noqa: BLE001 - what the test is looking for
            errors.append(exc)

    import sys

    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as CPython can, so a lookup lands mid-change
    try:
        lookers = [threading.Thread(target=look) for _ in range(2)]
        for t in lookers:
            t.start()
        for i in range(3000):
            g.door(f"door-{i}", threadsafe=False)
        stop.set()
        for t in lookers:
            t.join()
    finally:
        sys.setswitchinterval(before)
    assert errors == []
