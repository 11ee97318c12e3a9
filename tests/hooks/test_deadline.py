"""The call deadline interrupts only a hook, never the runner or the caller, and only once it is due."""

from __future__ import annotations

import threading
import time

from hookserver.hooks import HookRegistry, HookResult, PodRequest, Stage, run_stage
from hookserver.hooks.deadline import CallDeadline
from hookserver.view import NodeView

POD = PodRequest("ns", "p", "uid-1")


class Sleepy:
    name = "Sleepy"

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        time.sleep(2.0)  # blocked in a system call: only a signal to this thread ends it early
        return HookResult()


class Spinning:
    name = "Spinning"

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        end = time.monotonic() + 2.0
        while time.monotonic() < end:  # busy in Python code
            pass
        return HookResult()


def _nudger(deadline: CallDeadline, stop: threading.Event) -> threading.Thread:
    def poll() -> None:
        while not stop.wait(0.01):
            deadline.nudge()

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    return thread


def test_a_blocked_or_busy_hook_is_interrupted_after_its_deadline() -> None:
    for plugin in (Sleepy(), Spinning()):
        deadline = CallDeadline()
        stop = threading.Event()
        _nudger(deadline, stop)
        try:
            assert deadline.arm(0.1)
            started = time.monotonic()
            out = run_stage(HookRegistry([plugin]), Stage.PRE_RUN_POD_SANDBOX, POD, NodeView.build())
            took = time.monotonic() - started
            deadline.disarm()
        finally:
            stop.set()
        assert 0.1 <= took < 1.0, took
        assert out.failed and out.outcomes[0].error_type == "HookTimeout" and deadline.fired
        assert "ran past the call's 100 ms deadline" in out.outcomes[0].error


def test_nothing_happens_before_the_deadline_or_outside_a_hook() -> None:
    deadline = CallDeadline()
    assert deadline.arm(10.0)
    assert not deadline.nudge()  # not due yet
    deadline.disarm()
    assert not deadline.nudge()  # disarmed
    assert deadline.arm(0.0)
    assert deadline.nudge()  # due: the signal goes to this (main) thread, which is in no hook
    time.sleep(0.01)  # the handler runs here, finds no hook on the stack, and raises nothing
    deadline.disarm()
    assert not deadline.fired and deadline.interrupts == 0
