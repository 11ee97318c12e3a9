"""The inline hot path: CreateContainer/UpdateContainer run on the event loop, and fail-open holds without a
thread hand-off (per-hook breaker, call deadline, loop watchdog). Real sockets, the fake runtime."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from hookserver.api import nri_pb2
from hookserver.hooks import BreakerState, Stage
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.outcome import FailurePolicy, HookResult
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.nri.watchdog import LoopWatchdog
from tests.nri.conftest import EXPECTED, be_pod, container, nri_world, run
from tests.nri.fake_runtime import RuntimeConn


async def _create(conn: RuntimeConn, pod: nri_pb2.PodSandbox, name: str, cid: str) -> tuple[nri_pb2.CreateContainerResponse, float]:
    started = time.monotonic()
    reply = await conn.call(
        "CreateContainer", nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, name, cid)),
        nri_pb2.CreateContainerResponse,
    )
    return reply, time.monotonic() - started


class Recording:
    """batchresource, recording the thread each call ran on."""

    name = "Recording"

    def __init__(self) -> None:
        self.threads: list[str] = []

    def pre_create_container(self, request: object, view: object) -> HookResult:
        self.threads.append(threading.current_thread().name)
        return BatchResourcePlugin().pre_create_container(request, view)  # type: ignore[arg-type]


class SlowShares:
    """Takes `sleep_s` per call (deliberately over the 50 ms hook budget), then answers shares=999."""

    name = "SlowShares"

    def __init__(self, sleep_s: float) -> None:
        self.sleep_s = sleep_s
        self.calls = 0

    def pre_create_container(self, request: object, view: object) -> HookResult:
        self.calls += 1
        time.sleep(self.sleep_s)
        from hookserver.resources import Resources

        return HookResult(resources=Resources(cpu_shares=999), reason="slow")


class Broken:
    name = "Broken"

    def pre_create_container(self, request: object, view: object) -> HookResult:
        raise RuntimeError("hook bug")


def test_create_container_runs_on_the_loop_thread(sock_dir: Path) -> None:
    hook = Recording()

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[hook]) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            reply, _ = await _create(conn, pod, "a", "ctr-a")
            assert reply.adjust.linux.resources.cpu.shares.value == EXPECTED["a"][0]
            assert hook.threads == [threading.current_thread().name]  # no worker thread: the loop's own
            assert w.plugin.status()["calls"]["CreateContainer"] == 1

    run(body())


def test_slow_hook_trips_its_breaker_and_the_runtime_answers_within_the_deadline(sock_dir: Path) -> None:
    slow = SlowShares(0.08)  # over the 50 ms budget, far inside the 2 s request timeout

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[slow]) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            for i in range(3):
                reply, took = await _create(conn, pod, "a", f"ctr-{i}")
                assert reply.adjust.linux.resources.cpu.shares.value == 999  # slow, but still answered
                assert took < 2.0
            assert w.dispatcher.breakers.state("SlowShares", Stage.PRE_CREATE_CONTAINER) is BreakerState.OPEN
            reply, took = await _create(conn, pod, "a", "ctr-after")
            assert reply.SerializeToString() == b""  # skipped: "no change"
            assert slow.calls == 3 and took < 0.5
            status = w.plugin.status()["breakers"]
            assert status["open"] == ["SlowShares/PreCreateContainer"]
            assert status["hooks"]["SlowShares/PreCreateContainer"]["skipped_calls"] == 1
            why = [d for d in w.store.audit.decisions() if d.container == "a"][-1]
            assert not why.applied and why.reason.startswith("breaker open: 3 runs in a row over budget")

    run(body())


def test_hook_blocked_past_the_deadline_is_interrupted_then_skipped(sock_dir: Path) -> None:
    slow = SlowShares(1.5)

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[slow], request_timeout_ms=400) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            reply, took = await _create(conn, pod, "a", "ctr-a")
            assert reply.SerializeToString() == b"" and took < 0.4  # interrupted at the 200 ms budget
            assert w.dispatcher.breakers.state("SlowShares", Stage.PRE_CREATE_CONTAINER) is BreakerState.OPEN
            reply, took = await _create(conn, pod, "a", "ctr-b")
            assert reply.SerializeToString() == b"" and took < 0.1 and slow.calls == 1
            status = w.plugin.status()
            assert status["hook_interrupts"] == 1 and status["timeouts"] == 1

    run(body())


def test_hook_exception_under_ignore_answers_no_change_inline(sock_dir: Path) -> None:
    async def body(policy: FailurePolicy) -> tuple[bytes, int]:
        async with nri_world(sock_dir, plugins=[Broken()], policy=policy) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            try:
                reply, _ = await _create(conn, pod, "a", "ctr-a")
            except Exception as exc:  # noqa: BLE001 - the Fail case: the runtime sees an error status
                return b"", getattr(exc, "code", -1)
            errors = [e for e in w.store.audit.events() if e.result == "error"]
            assert errors and "hook bug" in errors[-1].error
            decision = w.store.audit.decisions()[-1]
            assert decision.plugin == "Broken" and decision.error == "hook bug"
            return reply.SerializeToString(), 0

    assert run(body(FailurePolicy.IGNORE)) == (b"", 0)
    assert run(body(FailurePolicy.FAIL)) == (b"", 2)  # UNKNOWN: the runtime fails the operation


def test_update_container_runs_inline_and_answers_an_update(sock_dir: Path) -> None:
    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            ctr = container(pod, "b", "ctr-b")
            reply = await conn.call(
                "UpdateContainer", nri_pb2.UpdateContainerRequest(pod=pod, container=ctr),
                nri_pb2.UpdateContainerResponse,
            )
            assert [u.container_id for u in reply.update] == ["ctr-b"]
            assert reply.update[0].linux.resources.cpu.shares.value == EXPECTED["b"][0]

    run(body())


def test_watchdog_reports_a_stall_once_per_call() -> None:
    now = [100.0]
    seen: list[tuple[str, float]] = []
    dog = LoopWatchdog(stall_s=0.5, clock=lambda: now[0], on_stall=lambda what, held: seen.append((what, held)))
    # the subject is the call's container request, formatted only when a stall is reported
    dog.enter("CreateContainer", ContainerRequest(PodRequest("ns", "p", "uid-p"), "a"))
    now[0] += 0.4
    assert dog.check() is None
    now[0] += 0.2
    found = dog.check()
    assert found is not None and found[0] == "CreateContainer for ns/p/a" and abs(found[1] - 0.6) < 1e-9
    now[0] += 1.0
    assert dog.check() is None  # the same call is reported once
    dog.leave()
    dog.enter("RunPodSandbox", "ns/q")  # or just a pod key
    now[0] += 0.7
    found = dog.check()
    assert found is not None and found[0] == "RunPodSandbox for ns/q"
    assert dog.stalls == 2 and len(seen) == 2 and dog.longest_stall_s >= 0.7


def test_a_create_container_longer_than_64_kib_is_answered_inline(sock_dir: Path) -> None:
    """A long request frame is read in place (`request_view`, for Synchronize chunks); a CreateContainer
    whose pod carries 100 KiB of annotations takes that path too and is answered as any other."""

    async def body() -> None:
        async with nri_world(sock_dir) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            pod.annotations["kubectl.kubernetes.io/last-applied-configuration"] = "x" * (100 << 10)
            reply, _ = await _create(conn, pod, "a", "ctr-long")
            assert reply.adjust.linux.resources.cpu.shares.value == EXPECTED["a"][0]

    run(body())


class PodRecording:
    """A pod hook recording the thread it ran on; `fail` makes it raise (a refusal under Fail)."""

    name = "PodRecording"

    def __init__(self, *, fail: bool = False, sleep_s: float = 0.0) -> None:
        self.threads: list[str] = []
        self.fail = fail
        self.sleep_s = sleep_s

    def pre_run_pod_sandbox(self, request: PodRequest, view: object) -> HookResult:
        self.threads.append(threading.current_thread().name)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.fail:
            raise ValueError("this pod is refused")
        return HookResult()


def test_run_pod_sandbox_runs_on_the_loop_thread_in_both_forms(sock_dir: Path) -> None:
    """nri v0.12's dedicated rpc and nri <= v0.11's StateChange(RunPodSandbox) are answered inline (before this,
    a worker thread's hand-off cost more than the hooks); other StateChange events still take the task path."""
    hook = PodRecording()

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[hook]) as w:
            conn = await w.runtime.ready_conn()
            await conn.call("StateChange", nri_pb2.StateChangeEvent(event=1, pod=be_pod()), nri_pb2.Empty)
            pod2 = be_pod("uid-2", name="be-2", sandbox="sb-2", cgroup_parent="/kubepods/besteffort/poduid-2")
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod2), nri_pb2.RunPodSandboxResponse)
            assert hook.threads == [threading.current_thread().name] * 2  # the loop's own, no worker
            assert {"uid-1", "uid-2"} <= set(w.store.snapshot().pods)  # learnt right after the answer (Ignore)
            await conn.call("StateChange", nri_pb2.StateChangeEvent(event=3, pod=pod2), nri_pb2.Empty)  # remove
            assert "uid-2" not in w.store.snapshot().pods
            calls = w.plugin.status()["calls"]
            assert calls["RunPodSandbox"] == 1 and calls["StateChange"] == 2

    run(body())


def test_run_pod_sandbox_inline_refuses_the_pod_under_fail(sock_dir: Path) -> None:
    from tests.nri.fake_runtime import CallError

    hook = PodRecording(fail=True)

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[hook], policy=FailurePolicy.FAIL) as w:
            conn = await w.runtime.ready_conn()
            try:
                await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=be_pod()),
                                nri_pb2.RunPodSandboxResponse)
            except CallError as exc:
                assert "refused" in str(exc)
            else:
                raise AssertionError("the pod was not refused")
            assert hook.threads == [threading.current_thread().name]
            assert w.plugin.status()["rejections"] == 1

    run(body())


def test_a_run_pod_sandbox_hook_blocked_past_the_deadline_is_interrupted_inline(sock_dir: Path) -> None:
    hook = PodRecording(sleep_s=1.5)

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[hook], request_timeout_ms=400) as w:
            conn = await w.runtime.ready_conn()
            started = time.monotonic()
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=be_pod()), nri_pb2.RunPodSandboxResponse)
            assert time.monotonic() - started < 0.4  # interrupted at the 200 ms budget: Ignore answers anyway
            status = w.plugin.status()
            assert status["hook_interrupts"] == 1 and status["timeouts"] == 1

    run(body())
