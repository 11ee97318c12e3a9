"""All seven rpcs over a real unix-socket server: real dispatcher, batchresource, store; fake executor."""

from __future__ import annotations

import pytest

from hookserver.api import runtime_hook_pb2 as pb
from tests.proxy.conftest import Harness, container_request, pod_request

CONTAINER_ECHO_ONLY = ["PreStartContainerHook", "PostStartContainerHook", "PostStopContainerHook"]


def assert_container_echo(resp: pb.ContainerResourceHookResponse, req: pb.ContainerResourceHookRequest) -> None:
    assert dict(resp.container_annotations) == dict(req.container_annotations)
    assert dict(resp.container_envs) == dict(req.container_envs)
    assert resp.pod_cgroup_parent == req.pod_cgroup_parent
    assert resp.HasField("container_resources") == req.HasField("container_resources")
    assert resp.container_resources == req.container_resources


def test_pre_run_pod_sandbox_be_worked_example_writes_pod_cgroup(harness: Harness) -> None:
    req = pod_request()
    resp = harness.stub.PreRunPodSandboxHook(req, timeout=5)
    # Echo first: everything the proxy merges back is the request's own.
    assert dict(resp.labels) == dict(req.labels)
    assert dict(resp.annotations) == dict(req.annotations)
    assert resp.cgroup_parent == req.cgroup_parent
    # Reference §4.5 pod row, in the response and (what matters: the proxy drops pod resources) the pod plan.
    assert (resp.resources.cpu_shares, resp.resources.cpu_quota, resp.resources.memory_limit_in_bytes) == (
        2048, 300000, 3221225472,
    )
    assert len(harness.executor.plans) == 1
    writes = {w.resource.value: w.value for w in harness.executor.plans[0].all_writes()}
    assert writes == {"cpu.shares": 2048, "cpu.cfs_quota_us": 300000, "memory.limit_in_bytes": 3221225472}
    assert {w.cgroup_dir for w in harness.executor.plans[0].all_writes()} == {"/kubepods/besteffort/poduid-1"}
    assert "uid-1" in harness.store.snapshot().pods
    event = harness.store.audit.events()[-1]
    assert (event.door, event.rpc, event.result, event.pod_key) == ("proxy", "PreRunPodSandboxHook", "ok", "default/be-pod")


@pytest.mark.parametrize(
    ("rpc", "container", "expected"),
    [
        ("PreCreateContainerHook", "a", (512, 100000, 1073741824)),
        ("PreCreateContainerHook", "b", (1536, 200000, 2147483648)),
        ("PreUpdateContainerResourcesHook", "a", (512, 100000, 1073741824)),
        ("PreUpdateContainerResourcesHook", "b", (1536, 200000, 2147483648)),
    ],
)
def test_container_stages_set_batch_values_and_keep_everything_else(
    harness: Harness, rpc: str, container: str, expected: tuple[int, int, int]
) -> None:
    req = container_request(container)
    resp = getattr(harness.stub, rpc)(req, timeout=5)
    got = resp.container_resources
    assert (got.cpu_shares, got.cpu_quota, got.memory_limit_in_bytes) == expected
    # Untouched by the hook: must be the request's values (the proxy overwrites cpuset/oom from here).
    sent = req.container_resources
    assert got.cpuset_cpus == "0-3" and got.oom_score_adj == 1000
    assert (got.cpu_period, got.cpuset_mems, list(got.hugepage_limits), dict(got.unified)) == (
        sent.cpu_period, sent.cpuset_mems, list(sent.hugepage_limits), dict(sent.unified),
    )
    assert got.memory_swap_limit_in_bytes == sent.memory_swap_limit_in_bytes
    assert dict(resp.container_annotations) == dict(req.container_annotations)
    assert dict(resp.container_envs) == dict(req.container_envs)
    assert resp.pod_cgroup_parent == req.pod_cgroup_parent
    assert harness.executor.plans == []  # container values travel in the response, never as writes here


def test_container_resources_are_created_when_the_request_had_none(harness: Harness) -> None:
    req = container_request("b")
    req.ClearField("container_resources")
    resp = harness.stub.PreCreateContainerHook(req, timeout=5)
    assert resp.HasField("container_resources")
    got = resp.container_resources
    assert (got.cpu_shares, got.cpu_quota, got.memory_limit_in_bytes, got.cpuset_cpus) == (1536, 200000, 2147483648, "")


@pytest.mark.parametrize("rpc", CONTAINER_ECHO_ONLY)
def test_stages_without_hooks_echo_the_request(harness: Harness, rpc: str) -> None:
    req = container_request("a")
    req.container_meta.id = "c0ffee"
    resp = getattr(harness.stub, rpc)(req, timeout=5)
    assert_container_echo(resp, req)
    assert harness.store.audit.events()[-1].rpc == rpc


def test_post_stop_container_forgets_the_container(harness: Harness) -> None:
    req = container_request("a")
    req.container_meta.id = "c0ffee"
    harness.stub.PostStartContainerHook(req, timeout=5)
    assert "c0ffee" in harness.store.snapshot().containers
    harness.stub.PostStopContainerHook(req, timeout=5)
    assert "c0ffee" not in harness.store.snapshot().containers


def test_post_stop_pod_sandbox_echoes_and_forgets_the_pod(harness: Harness) -> None:
    harness.stub.PreRunPodSandboxHook(pod_request(), timeout=5)
    assert "uid-1" in harness.store.snapshot().pods
    req = pod_request()
    resp = harness.stub.PostStopPodSandboxHook(req, timeout=5)
    assert dict(resp.labels) == dict(req.labels) and dict(resp.annotations) == dict(req.annotations)
    assert resp.cgroup_parent == req.cgroup_parent and not resp.HasField("resources")
    assert "uid-1" not in harness.store.snapshot().pods


@pytest.mark.parametrize("labels", [{}, {"koordinator.sh/qosClass": "LS"}, {"koordinator.sh/qosClass": "LSR"}])
def test_non_be_pods_get_their_request_back(harness: Harness, labels: dict[str, str]) -> None:
    creq = container_request("a", labels=labels)
    assert_container_echo(harness.stub.PreCreateContainerHook(creq, timeout=5), creq)
    preq = pod_request(labels=labels)
    presp = harness.stub.PreRunPodSandboxHook(preq, timeout=5)
    assert not presp.HasField("resources") and dict(presp.labels) == labels
    assert harness.executor.plans == []


def test_skip_label_echoes_without_running_hooks(harness: Harness) -> None:
    labels = {"koordinator.sh/qosClass": "BE", "runtimeproxy.koordinator.sh/skip-hookserver": "true"}
    creq = container_request("a", labels=labels)
    assert_container_echo(harness.stub.PreCreateContainerHook(creq, timeout=5), creq)
    presp = harness.stub.PreRunPodSandboxHook(pod_request(labels=labels), timeout=5)
    assert not presp.HasField("resources")
    assert harness.executor.plans == []
    assert [e.result for e in harness.store.audit.events()] == ["skipped", "skipped"]
    assert harness.store.audit.decisions() == []
