"""Pod and lifecycle events are answered before their hooks run when nothing the hooks do can change the
answer (Ignore), in order per pod; under Fail, RunPodSandbox still waits for its hooks, which may refuse it.
(`hookserver.nri.handlers.PluginService._answer_or_defer`)"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from hookserver.api import nri_pb2
from hookserver.hooks import HookResult, PodRequest
from hookserver.hooks.outcome import FailurePolicy
from hookserver.view import NodeView
from tests.nri.conftest import be_pod, nri_world, run
from tests.nri.fake_runtime import CallError, wait_for


class Gate:
    """A pod hook that waits until the test lets it go, then notes it ran (or fails, if told to)."""

    name = "Gate"

    def __init__(self, *, fail: bool = False) -> None:
        self.release = threading.Event()
        self.ran: list[str] = []
        self.fail = fail

    def pre_run_pod_sandbox(self, request: PodRequest, view: NodeView) -> HookResult:
        self.release.wait(5)
        self.ran.append(request.uid)
        if self.fail:
            raise ValueError("the gate refuses this pod")
        return HookResult()


def test_under_ignore_run_pod_sandbox_is_answered_before_its_hooks_run(sock_dir: Path) -> None:
    gate = Gate()
    order: list[str] = []

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[gate]) as w:
            conn = await w.runtime.ready_conn()
            call = asyncio.ensure_future(conn.call(
                "RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=be_pod()), nri_pb2.RunPodSandboxResponse))
            await asyncio.wait_for(call, 2)  # answered while the hook is still held
            order.append("answered")
            assert gate.ran == []
            gate.release.set()
            await wait_for(lambda: gate.ran == ["uid-1"], what="the hook, after the answer")
            order.append("hook ran")
            await wait_for(lambda: "uid-1" in w.store.snapshot().pods, what="the pod learned")
            # The hooks ran to the end within their budget: not cut off by it, as when the answer waited for them
            # (the runtime then got "no change" only after the budget, half its request timeout).
            events = [e for e in w.store.audit.events() if e.rpc == "RunPodSandbox"]
            assert [e.result for e in events] == ["ok"]
            assert w.plugin.status()["timeouts"] == 0

    run(body())
    assert order == ["answered", "hook ran"]


def test_under_fail_run_pod_sandbox_waits_for_its_hooks_and_a_failing_hook_refuses_the_pod(sock_dir: Path) -> None:
    gate = Gate(fail=True)

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[gate], policy=FailurePolicy.FAIL) as w:
            conn = await w.runtime.ready_conn()
            call = asyncio.ensure_future(conn.call(
                "RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=be_pod()), nri_pb2.RunPodSandboxResponse))
            await asyncio.sleep(0.3)
            assert not call.done()  # the answer waits for the hook
            gate.release.set()
            with pytest.raises(CallError):
                await asyncio.wait_for(call, 5)
            assert gate.ran == ["uid-1"]

    run(body())


def test_a_pods_events_run_in_the_order_they_were_answered(sock_dir: Path) -> None:
    """RunPodSandbox's hooks held, RemovePodSandbox answered meanwhile: the removal runs after the run, so the
    pod ends forgotten (run after remove would have filed it again)."""
    gate = Gate()

    async def body() -> None:
        async with nri_world(sock_dir, plugins=[gate]) as w:
            conn = await w.runtime.ready_conn()
            pod = be_pod()
            await conn.call("RunPodSandbox", nri_pb2.RunPodSandboxRequest(pod=pod), nri_pb2.RunPodSandboxResponse)
            await conn.call(
                "RemovePodSandbox", nri_pb2.RemovePodSandboxRequest(pod=pod), nri_pb2.RemovePodSandboxResponse)
            gate.release.set()
            await wait_for(lambda: gate.ran == ["uid-1"], what="the run's hook")
            await asyncio.sleep(0.2)
            assert "uid-1" not in w.store.snapshot().pods

    run(body())
