"""Translation rules, over rich generated inputs: wire resources in, echo then adjust out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookserver.api import runtime_hook_pb2 as pb
from hookserver.errors import InputError
from hookserver.hooks import RequestSource
from hookserver.proxy import translate
from hookserver.resources import Resources

INT64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
TEXT = st.text(max_size=12)
MAPS = st.dictionaries(TEXT, TEXT, max_size=4)
CPUSETS = st.sampled_from(["", "0", "0-3", "1,3,5-7"])


@st.composite
def wire_resources(draw: st.DrawFn) -> pb.LinuxContainerResources:
    return pb.LinuxContainerResources(
        cpu_period=draw(INT64), cpu_quota=draw(INT64), cpu_shares=draw(INT64), memory_limit_in_bytes=draw(INT64),
        oom_score_adj=draw(st.integers(-1000, 1000)), cpuset_cpus=draw(CPUSETS), cpuset_mems=draw(CPUSETS),
        hugepage_limits=[pb.HugepageLimit(page_size=p, limit=n) for p, n in draw(st.lists(
            st.tuples(st.sampled_from(["2MB", "1GB"]), st.integers(0, 1 << 40)), max_size=2))],
        unified=draw(MAPS), memory_swap_limit_in_bytes=draw(INT64),
    )


@st.composite
def produced_resources(draw: st.DrawFn) -> Resources:
    return Resources(
        cpu_shares=draw(st.none() | st.integers(2, 262144)), cpu_quota_us=draw(st.none() | st.integers(-1, 1 << 40)),
        memory_limit_bytes=draw(st.none() | st.integers(-1, 1 << 50)), cpuset_cpus=draw(st.none() | CPUSETS),
    )


@st.composite
def container_requests(draw: st.DrawFn) -> pb.ContainerResourceHookRequest:
    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name=draw(TEXT.filter(bool)), uid=draw(TEXT.filter(bool)), namespace=draw(TEXT)),
        container_meta=pb.ContainerMetadata(name=draw(TEXT.filter(bool)), id=draw(TEXT), attempt=draw(st.integers(0, 9))),
        pod_cgroup_parent=draw(TEXT), container_annotations=draw(MAPS), container_envs=draw(MAPS),
        pod_annotations=draw(MAPS), pod_labels=draw(MAPS),
    )
    if draw(st.booleans()):
        req.container_resources.CopyFrom(draw(wire_resources()))
    if draw(st.booleans()):
        req.pod_resources.CopyFrom(draw(wire_resources()))
    return req


@given(wire_resources())
def test_resources_from_wire_follows_koordlet_from_proxy(wire: pb.LinuxContainerResources) -> None:
    got = translate.resources_from_wire(wire)
    assert got.cpu_shares == (wire.cpu_shares if wire.cpu_shares != 0 else None)
    assert got.cpu_quota_us == (wire.cpu_quota if wire.cpu_quota != 0 else None)
    memory = wire.memory_limit_in_bytes
    assert got.memory_limit_bytes == (None if memory == 0 else -1 if memory < 0 else memory)
    assert got.cpuset_cpus == (wire.cpuset_cpus or None)
    assert got.cpu_period_us is None and got.cpuset_mems is None  # hooks never read these from the proxy


@given(container_requests())
def test_container_request_carries_every_field_the_hooks_read(req: pb.ContainerResourceHookRequest) -> None:
    got = translate.container_request(req)
    assert (got.pod.namespace, got.pod.name, got.pod.uid) == (
        req.pod_meta.namespace, req.pod_meta.name, req.pod_meta.uid,
    )
    assert dict(got.pod.labels) == dict(req.pod_labels) and dict(got.pod.annotations) == dict(req.pod_annotations)
    assert (got.name, got.container_id, got.attempt) == (
        req.container_meta.name, req.container_meta.id, req.container_meta.attempt,
    )
    assert dict(got.annotations) == dict(req.container_annotations) and dict(got.envs) == dict(req.container_envs)
    assert got.cgroup_parent == req.pod_cgroup_parent == got.pod.cgroup_parent
    assert got.source is RequestSource.PROXY and got.pod.source is RequestSource.PROXY
    if req.HasField("container_resources"):
        assert got.resources == translate.resources_from_wire(req.container_resources)
    else:
        assert got.resources.is_empty()


@settings(max_examples=200)
@given(container_requests(), produced_resources(), MAPS)
def test_container_response_is_the_echo_with_only_hook_values_overwritten(
    req: pb.ContainerResourceHookRequest, produced: Resources, envs: dict[str, str]
) -> None:
    resp = translate.container_response(req, produced, envs)
    assert dict(resp.container_annotations) == dict(req.container_annotations)
    assert resp.pod_cgroup_parent == req.pod_cgroup_parent
    assert dict(resp.container_envs) == {**req.container_envs, **envs}
    hook_set = not produced.is_empty()
    assert resp.HasField("container_resources") == (req.HasField("container_resources") or hook_set)
    sent, got = req.container_resources, resp.container_resources
    pairs = [
        ("cpu_shares", produced.cpu_shares), ("cpu_quota", produced.cpu_quota_us),
        ("memory_limit_in_bytes", produced.memory_limit_bytes), ("cpuset_cpus", produced.cpuset_cpus),
    ]
    for name, value in pairs:
        assert getattr(got, name) == (getattr(sent, name) if value is None else value), name
    for name in ("cpu_period", "oom_score_adj", "cpuset_mems", "memory_swap_limit_in_bytes"):
        assert getattr(got, name) == getattr(sent, name), name
    assert list(got.hugepage_limits) == list(sent.hugepage_limits) and dict(got.unified) == dict(sent.unified)
    # And it survives the wire.
    assert pb.ContainerResourceHookResponse.FromString(resp.SerializeToString()) == resp


@given(MAPS, MAPS, TEXT, st.booleans(), produced_resources())
def test_pod_response_echoes_labels_annotations_parent_and_resources(
    labels: dict[str, str], annotations: dict[str, str], parent: str, with_resources: bool, produced: Resources
) -> None:
    req = pb.PodSandboxHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="p", uid="u"), labels=labels, annotations=annotations, cgroup_parent=parent
    )
    if with_resources:
        req.resources.CopyFrom(pb.LinuxContainerResources(cpu_shares=2, cpuset_cpus="0-1", oom_score_adj=-998))
    resp = translate.pod_response(req, produced)
    assert dict(resp.labels) == labels and dict(resp.annotations) == annotations and resp.cgroup_parent == parent
    assert resp.HasField("resources") == (with_resources or not produced.is_empty())
    if with_resources:
        assert resp.resources.oom_score_adj == -998
        assert resp.resources.cpuset_cpus == (produced.cpuset_cpus if produced.cpuset_cpus is not None else "0-1")
    if produced.cpu_shares is not None:
        assert resp.resources.cpu_shares == produced.cpu_shares


def test_echo_never_aliases_the_request() -> None:
    req = pb.ContainerResourceHookRequest(container_resources=pb.LinuxContainerResources(cpuset_cpus="0"))
    resp = translate.container_response(req, Resources(cpuset_cpus="1"), {"A": "1"})
    assert req.container_resources.cpuset_cpus == "0" and dict(req.container_envs) == {}
    assert resp.container_resources.cpuset_cpus == "1"


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.ClearField("pod_meta"), "pod_meta"),
        (lambda r: setattr(r.pod_meta, "uid", ""), "pod_meta.uid"),
        (lambda r: setattr(r.pod_meta, "name", ""), "pod_meta.name"),
        (lambda r: r.ClearField("container_meta"), "container_meta"),
        (lambda r: setattr(r.container_meta, "name", ""), "container_meta.name"),
    ],
)
def test_unnamed_requests_raise_input_error_naming_the_field(mutate: object, field: str) -> None:
    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="p", uid="u"), container_meta=pb.ContainerMetadata(name="c")
    )
    translate.container_request(req)  # complete: fine
    mutate(req)  # type: ignore[operator]
    with pytest.raises(InputError) as info:
        translate.container_request(req)
    assert info.value.field == field
    if field.startswith("pod_meta"):
        preq = pb.PodSandboxHookRequest(pod_meta=pb.PodSandboxMetadata(name="p", uid="u"))
        mutate(preq)  # type: ignore[operator]
        with pytest.raises(InputError, match=field.replace(".", r"\.")):
            translate.pod_request(preq)


def test_maps_are_read_in_place_and_never_written() -> None:
    """The pod and container maps are views of the request (`WireMap`): same content as the wire, lookups of
    absent keys do not insert them into the request (a protobuf map's `m[key]` would), and the store's pod
    record holds a copy, not the request."""
    from hookserver.api import runtime_hook_pb2 as pb
    from hookserver.dispatch import HookDispatcher
    from hookserver.hooks.context import QoSClass
    from hookserver.hooks.registry import HookRegistry
    from hookserver.hooks.stages import Stage
    from hookserver.proxy import translate
    from hookserver.store.state import StateStore

    req = pb.ContainerResourceHookRequest(
        pod_meta=pb.PodSandboxMetadata(name="p", uid="u-view", namespace="ns"),
        container_meta=pb.ContainerMetadata(name="main"), pod_cgroup_parent="/kubepods/besteffort/podu-view",
        pod_labels={"b": "2", "a": "1", "koordinator.sh/qosClass": "BE"}, pod_annotations={"x": "y"},
        container_envs={"PATH": "/bin"},
    )
    creq = translate.container_request(req)
    pod = creq.pod
    assert dict(pod.labels) == {"a": "1", "b": "2", "koordinator.sh/qosClass": "BE"} and pod.labels == dict(pod.labels)
    assert pod.labels.get("absent") is None and "absent" not in pod.labels and pod.annotations.get("nope", "d") == "d"
    with pytest.raises(KeyError):
        pod.labels["absent"]
    assert QoSClass.from_labels(pod.labels) is QoSClass.BE and creq.envs["PATH"] == "/bin"
    assert len(req.pod_labels) == 3 and len(req.pod_annotations) == 1  # nothing was inserted into the request

    store = StateStore()
    HookDispatcher(registry=HookRegistry([]), store=store, executor=None).dispatch_container(
        Stage.PRE_CREATE_CONTAINER, creq, door="proxy", rpc="PreCreateContainerHook"
    )
    record = store.snapshot().pods["u-view"]
    assert dict(record.labels) == dict(pod.labels) and type(record.labels).__name__ == "mappingproxy"
    req.pod_labels["a"] = "changed"  # were the record a view of the request, this would show through
    assert store.snapshot().pods["u-view"].labels["a"] == "1"
