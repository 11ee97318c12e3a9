"""The NRI hot path answers before it keeps books: the reply is written, then the call is learnt, audited
and counted (`dispatch.HookDispatcher.record_later`), and always before the next call is decided."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry

from hookserver.api import nri_pb2
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.deadline import CallDeadline
from hookserver.hooks.outcome import FailurePolicy
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.nri.conn import TtrpcServer
from hookserver.nri.handlers import PLUGIN_SERVICE, PluginService
from hookserver.nri.status import NriStatus
from hookserver.nri.ttrpc import MessageType, encode_frame
from hookserver.nri.watchdog import LoopWatchdog
from hookserver.observability.metrics import HookMetrics
from hookserver.store.state import StateStore
from tests.nri.conftest import EXPECTED, be_pod, container


def _service(store: StateStore, registry: CollectorRegistry | None = None) -> PluginService:
    hooks = HookRegistry([BatchResourcePlugin()])
    dispatcher = HookDispatcher(
        registry=hooks, store=store, executor=None, metrics=HookMetrics(registry or CollectorRegistry())
    )
    return PluginService(
        dispatcher=dispatcher, registry=hooks, policy=FailurePolicy.IGNORE, status=NriStatus("test", "-"),
        pool=None, deadline=CallDeadline(), watchdog=LoopWatchdog(),  # type: ignore[arg-type]
    )


def _payload(pod: nri_pb2.PodSandbox, name: str, cid: str) -> bytes:
    return nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, name, cid)).SerializeToString()


def _nri_events(store: StateStore) -> list[tuple[str, str, str]]:
    return [(e.rpc, e.container, e.result) for e in store.audit.events() if e.door == "nri"]


def test_an_answered_call_is_recorded_after_the_reply_and_before_the_next_call() -> None:
    store = StateStore()
    metrics_registry = CollectorRegistry()
    service = _service(store, metrics_registry)
    create = service.inline_methods()["CreateContainer"]
    pod = be_pod()

    reply = create(_payload(pod, "a", "ctr-a"), None)
    assert reply is not None
    assert nri_pb2.CreateContainerResponse.FromString(reply).adjust.linux.resources.cpu.shares.value == EXPECTED["a"][0]
    # Answered, not yet recorded: nothing learnt, audited or counted.
    assert "ctr-a" not in store.snapshot().containers
    assert _nri_events(store) == [] and store.audit.decisions() == []

    service.after_inline_reply()
    assert store.snapshot().containers["ctr-a"].pod_uid == pod.uid
    assert _nri_events(store) == [("CreateContainer", "a", "ok")]
    assert [d.plugin for d in store.audit.decisions()] == ["BatchResource"]

    # A caller that never calls after_inline_reply still loses nothing: the next call records the last first.
    create(_payload(pod, "b", "ctr-b"), None)
    assert "ctr-b" not in store.snapshot().containers
    create(_payload(pod, "a", "ctr-c"), None)
    assert "ctr-b" in store.snapshot().containers and "ctr-c" not in store.snapshot().containers
    service.after_inline_reply()
    assert _nri_events(store) == [("CreateContainer", "a", "ok"), ("CreateContainer", "b", "ok"), ("CreateContainer", "a", "ok")]
    service.after_inline_reply()  # nothing left: a no-op
    assert len(_nri_events(store)) == 3


def test_a_failing_record_after_the_reply_is_logged_and_counted(caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    store = StateStore()
    service = _service(store)
    create = service.inline_methods()["CreateContainer"]
    pod = be_pod()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("store is broken")

    monkeypatch.setattr(store, "upsert_container", broken)
    reply = create(_payload(pod, "a", "ctr-a"), None)
    assert reply is not None and nri_pb2.CreateContainerResponse.FromString(reply).adjust.linux.resources.cpu.shares.value
    with caplog.at_level(logging.ERROR):
        service.after_inline_reply()
    assert "recording the call failed" in caplog.text and "store is broken" in caplog.text
    assert service._status.errors == 1  # shown in `hookctl nri`
    monkeypatch.undo()
    assert create(_payload(pod, "b", "ctr-b"), None) is not None  # the next call is answered as usual
    service.after_inline_reply()
    assert "ctr-b" in store.snapshot().containers


class _Mux:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_nowait(self, conn_id: int, data: bytes) -> None:
        self.sent.append(data)


def _request_frame(sid: int, method: str, payload: bytes) -> bytes:
    from hookserver.api import ttrpc_pb2

    request = ttrpc_pb2.Request(service=PLUGIN_SERVICE, method=method, payload=payload)
    return encode_frame(sid, MessageType.REQUEST, request.SerializeToString())


def test_the_server_runs_after_inline_once_the_reply_is_written(caplog: pytest.LogCaptureFixture) -> None:
    mux = _Mux()
    seen_when_called: list[int] = []

    def after() -> None:
        seen_when_called.append(len(mux.sent))
        if len(seen_when_called) == 2:
            raise RuntimeError("books failed")

    async def unused(payload: bytes, deadline: float | None) -> bytes:
        raise AssertionError("the inline handler answers")

    server = TtrpcServer(
        mux, 1, PLUGIN_SERVICE, {"CreateContainer": unused},  # type: ignore[arg-type]
        inline={"CreateContainer": lambda payload, deadline: b"reply:" + payload}, after_inline=after,
    )
    server.feed(_request_frame(1, "CreateContainer", b"x"))
    assert seen_when_called == [1]  # the reply was out before the books
    with caplog.at_level(logging.ERROR):
        server.feed(_request_frame(3, "CreateContainer", b"y"))
    assert seen_when_called == [1, 2] and len(mux.sent) == 2
    assert "bookkeeping after the reply failed" in caplog.text  # logged; the connection goes on
    server.feed(_request_frame(5, "CreateContainer", b"z"))
    assert len(mux.sent) == 3


def test_run_pod_sandbox_is_answered_before_its_pod_is_dispatched_under_ignore() -> None:
    """NRI has no pod-level adjustment: under Ignore RunPodSandbox's answer is empty whatever the hooks decide, so
    the runtime gets it first and the pod is learnt, decided, audited and written right after the reply (before
    the next call is decided); under Fail a refusal must fail the pod start, so the pod is dispatched first."""
    for policy in (FailurePolicy.IGNORE, FailurePolicy.FAIL):
        store = StateStore()
        service = _service(store)
        service._hot._policy = policy
        run_pod = service.inline_methods()["RunPodSandbox"]
        pod = be_pod()
        reply = run_pod(nri_pb2.RunPodSandboxRequest(pod=pod).SerializeToString(), None)
        assert reply == b"", policy
        learnt_at_answer = pod.uid in store.snapshot().pods
        assert learnt_at_answer is (policy is FailurePolicy.FAIL), policy
        service.after_inline_reply()
        assert pod.uid in store.snapshot().pods, policy
        assert [(e.rpc, e.result) for e in store.audit.events() if e.door == "nri"] == [("RunPodSandbox", "ok")], policy
        assert [d.plugin for d in store.audit.decisions()] == ["BatchResource"], policy
        # A caller that never calls after_inline_reply loses nothing: the next call dispatches the pod first.
        if policy is FailurePolicy.IGNORE:
            other = be_pod("uid-2", name="be-2", sandbox="sb-2", cgroup_parent="/kubepods/besteffort/poduid-2")
            run_pod(nri_pb2.RunPodSandboxRequest(pod=other).SerializeToString(), None)
            assert "uid-2" not in store.snapshot().pods
            service.inline_methods()["CreateContainer"](_payload(other, "a", "ctr-a"), None)
            assert "uid-2" in store.snapshot().pods
