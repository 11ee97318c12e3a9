"""Failure policy at the proxy door: Ignore echoes and audits, Fail refuses naming the field.

Also malformed protobuf bytes and unexpected internal errors: a clean status, and the next call works.
"""

from __future__ import annotations

import json

import grpc
import pytest

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.dispatch import HookDispatcher
from tests.proxy.conftest import SPEC_KEY, Harness, container_request, pod_request

BAD_JSON = {SPEC_KEY: "{not json"}
NEGATIVE = {SPEC_KEY: json.dumps({"containers": {"a": {"limits": {"kubernetes.io/batch-cpu": "-1"}}}})}
UNKNOWN_QOS = {"koordinator.sh/qosClass": "GOLD"}

# (labels, annotations, words the error must name)
BAD_INPUTS = [
    pytest.param(None, BAD_JSON, SPEC_KEY, id="bad-annotation-json"),
    pytest.param(None, NEGATIVE, "kubernetes.io/batch-cpu", id="negative-quantity"),
    pytest.param(UNKNOWN_QOS, None, "koordinator.sh/qosClass", id="unknown-qos-class"),
]


@pytest.mark.parametrize(("labels", "annotations", "field"), BAD_INPUTS)
def test_ignore_echoes_unchanged_and_audits_the_error(
    harness: Harness, labels: dict[str, str] | None, annotations: dict[str, str] | None, field: str
) -> None:
    req = container_request("a", labels=labels, annotations=annotations)
    resp = harness.stub.PreCreateContainerHook(req, timeout=5)
    assert resp.container_resources == req.container_resources
    assert dict(resp.container_envs) == dict(req.container_envs)
    event = harness.store.audit.events()[-1]
    assert event.result == "error" and field in event.error
    decision = harness.store.audit.decisions()[-1]
    assert decision.plugin == "BatchResource" and field in decision.error and not decision.applied

    preq = pod_request(labels=labels, annotations=annotations)
    presp = harness.stub.PreRunPodSandboxHook(preq, timeout=5)
    assert not presp.HasField("resources") and dict(presp.annotations) == dict(preq.annotations)
    assert harness.executor.plans == []
    assert harness.store.audit.events()[-1].result == "error"


@pytest.mark.parametrize(("labels", "annotations", "field"), BAD_INPUTS)
def test_fail_policy_refuses_with_invalid_argument_naming_the_field(
    failing: Harness, labels: dict[str, str] | None, annotations: dict[str, str] | None, field: str
) -> None:
    for call, req in (
        (failing.stub.PreCreateContainerHook, container_request("a", labels=labels, annotations=annotations)),
        (failing.stub.PreRunPodSandboxHook, pod_request(labels=labels, annotations=annotations)),
    ):
        with pytest.raises(grpc.RpcError) as info:
            call(req, timeout=5)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert field in info.value.details()
    assert failing.executor.plans == []
    assert [e.result for e in failing.store.audit.events()] == ["rejected", "rejected"]


INCOMPLETE = [
    pytest.param("pod_meta", id="no-pod-meta"),
    pytest.param("pod_meta.uid", id="empty-uid"),
    pytest.param("pod_meta.name", id="empty-name"),
]


def _strip(req: pb.PodSandboxHookRequest | pb.ContainerResourceHookRequest, field: str) -> None:
    if field == "pod_meta":
        req.ClearField("pod_meta")
    else:
        setattr(req.pod_meta, field.split(".")[1], "")


@pytest.mark.parametrize("field", INCOMPLETE)
def test_incomplete_requests_echo_under_ignore(harness: Harness, field: str) -> None:
    creq = container_request("a")
    _strip(creq, field)
    resp = harness.stub.PreCreateContainerHook(creq, timeout=5)
    assert resp.container_resources == creq.container_resources
    preq = pod_request()
    _strip(preq, field)
    presp = harness.stub.PreRunPodSandboxHook(preq, timeout=5)
    assert dict(presp.labels) == dict(preq.labels) and not presp.HasField("resources")
    events = harness.store.audit.events()
    assert [e.result for e in events] == ["error", "error"] and all(field in e.error for e in events)
    assert harness.store.snapshot().pods == {}  # nothing learned about an unnamed pod


@pytest.mark.parametrize("field", [*INCOMPLETE, pytest.param("container_meta.name", id="no-container-name")])
def test_incomplete_requests_are_refused_under_fail(failing: Harness, field: str) -> None:
    req = container_request("a")
    if field == "container_meta.name":
        req.container_meta.name = ""
    else:
        _strip(req, field)
    with pytest.raises(grpc.RpcError) as info:
        failing.stub.PreUpdateContainerResourcesHook(req, timeout=5)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert field in info.value.details()


@pytest.mark.parametrize("harness_name", ["harness", "failing"])
def test_malformed_protobuf_gets_invalid_argument_and_server_keeps_serving(
    request: pytest.FixtureRequest, harness_name: str
) -> None:
    h: Harness = request.getfixturevalue(harness_name)
    raw = h.channel.unary_unary(
        "/runtime.v1alpha1.RuntimeHookService/PreCreateContainerHook",
        request_serializer=None, response_deserializer=None,
    )
    for garbage in (b"\xff\xff\xff\xff", b"\x0a\x05ab", b"\x12\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"):
        with pytest.raises(grpc.RpcError) as info:
            raw(garbage, timeout=5)
        assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "runtime.v1alpha1.ContainerResourceHookRequest" in info.value.details()
    assert [e.result for e in h.store.audit.events()] == ["rejected"] * 3
    resp = h.stub.PreCreateContainerHook(container_request("a"), timeout=5)
    assert resp.container_resources.cpu_shares == 512


class _Boom(RuntimeError):
    pass


def _explode(*_args: object, **_kw: object) -> object:
    raise _Boom("store went away")


def test_unexpected_error_under_ignore_echoes_and_is_audited(
    harness: Harness, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(HookDispatcher, "dispatch_container", _explode)
    req = container_request("a")
    for _ in range(3):
        resp = harness.stub.PreCreateContainerHook(req, timeout=5)
        assert resp.container_resources == req.container_resources
    events = harness.store.audit.events()
    assert [e.result for e in events] == ["error"] * 3 and "_Boom" in events[-1].error
    tracebacks = [r for r in caplog.records if r.levelname == "ERROR" and "_Boom" in r.getMessage()]
    assert len(tracebacks) == 1  # logged once, then only counted and audited


def test_unexpected_error_under_fail_is_internal(failing: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(HookDispatcher, "dispatch_pod", _explode)
    with pytest.raises(grpc.RpcError) as info:
        failing.stub.PreRunPodSandboxHook(pod_request(), timeout=5)
    assert info.value.code() is grpc.StatusCode.INTERNAL and "store went away" in info.value.details()
    monkeypatch.undo()
    assert failing.stub.PreRunPodSandboxHook(pod_request(), timeout=5).resources.cpu_shares == 2048
