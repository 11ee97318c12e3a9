"""The NRI hot path reuses a pure stage's outcome for the same pod, container name, resources and view,
and runs the hooks again the moment any of them changes (`hookserver.hooks.memo`)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from hookserver.api import nri_pb2
from hookserver.dispatch import HookDispatcher
from hookserver.hooks.context import ContainerRequest, PodRequest
from hookserver.hooks.deadline import CallDeadline
from hookserver.hooks.memo import StageMemo
from hookserver.hooks.outcome import FailurePolicy, HookResult, StageOutcome
from hookserver.hooks.plugins.batchresource import BatchResourcePlugin
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.nri.handlers import PluginService
from hookserver.nri.status import NriStatus
from hookserver.nri.watchdog import LoopWatchdog
from hookserver.observability.metrics import HookMetrics
from hookserver.resources import Resources
from hookserver.slo.model import NodeSLOSpec
from hookserver.store.records import NodeRecord, PodRecord
from hookserver.store.state import StateStore
from hookserver.view import NodeView
from tests.nri.conftest import EXPECTED, be_pod, container


class CountingBatch:
    """BatchResource, counting its runs; pure as BatchResource is unless told otherwise."""

    name = "BatchResource"

    def __init__(self, *, pure: bool = True) -> None:
        self.pure_decision = pure
        self.runs = 0
        self._inner = BatchResourcePlugin()

    def pre_create_container(self, request: ContainerRequest, view: object) -> HookResult:
        self.runs += 1
        return self._inner.pre_create_container(request, view)  # type: ignore[arg-type]


class Broken:
    name = "Broken"
    pure_decision = True

    def __init__(self) -> None:
        self.runs = 0

    def pre_create_container(self, request: object, view: object) -> HookResult:
        self.runs += 1
        raise RuntimeError("hook bug")


def _world(*plugins: object) -> tuple[StateStore, PluginService, CollectorRegistry]:
    store, metrics = StateStore(), CollectorRegistry()
    hooks = HookRegistry(plugins)  # type: ignore[arg-type]
    dispatcher = HookDispatcher(registry=hooks, store=store, executor=None, metrics=HookMetrics(metrics))
    service = PluginService(
        dispatcher=dispatcher, registry=hooks, policy=FailurePolicy.IGNORE, status=NriStatus("test", "-"),
        pool=None, deadline=CallDeadline(), watchdog=LoopWatchdog(),  # type: ignore[arg-type]
    )
    return store, service, metrics


def _create(service: PluginService, pod: nri_pb2.PodSandbox, name: str, cid: str) -> nri_pb2.CreateContainerResponse:
    payload = nri_pb2.CreateContainerRequest(pod=pod, container=container(pod, name, cid)).SerializeToString()
    reply = service.inline_methods()["CreateContainer"](payload, None)
    service.after_inline_reply()
    assert reply is not None
    return nri_pb2.CreateContainerResponse.FromString(reply)


def _values(reply: nri_pb2.CreateContainerResponse) -> tuple[int, int, int]:
    res = reply.adjust.linux.resources
    return res.cpu.shares.value, res.cpu.quota.value, res.memory.limit.value


def test_the_same_inputs_run_the_hooks_once_and_every_call_is_still_recorded() -> None:
    hook = CountingBatch()
    store, service, metrics = _world(hook)
    pod = be_pod()
    replies = [_values(_create(service, pod, "a", f"ctr-{i}")) for i in range(4)]
    assert replies == [EXPECTED["a"]] * 4
    assert hook.runs == 1  # the first call files the pod (a new pod map, which a pure hook does not read)
    assert service._status.as_dict()["decision_memo"]["hits"] == 3
    assert {f"ctr-{i}" for i in range(4)} <= set(store.snapshot().containers)
    assert len([e for e in store.audit.events() if e.door == "nri"]) == 4
    assert len(store.audit.decisions()) == 4  # each call's decision, reused or not
    calls = metrics.get_sample_value(
        "hookserver_hook_calls_total", {"door": "nri", "rpc": "CreateContainer", "result": "ok"}
    )
    runs = metrics.get_sample_value(
        "hookserver_hook_plugin_duration_seconds_count", {"plugin": "BatchResource", "stage": "PreCreateContainer"}
    )
    assert (calls, runs) == (4.0, 1.0)  # plugin durations count real runs only


def test_another_container_name_or_a_nodeslo_change_runs_the_hooks_again() -> None:
    hook = CountingBatch()
    store, service, _ = _world(hook)
    pod = be_pod()
    _create(service, pod, "a", "ctr-1")
    _create(service, pod, "a", "ctr-2")
    runs = hook.runs
    assert _values(_create(service, pod, "b", "ctr-3")) == EXPECTED["b"]
    assert hook.runs == runs + 1
    # A policy switch is a new view: the hook runs, and the new rule (quota unlimited) is what comes back.
    store.set_node_slo(NodeSLOSpec.model_validate(
        {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressPolicy": "cfsQuota"}}
    ))
    shares, quota, _memory = _values(_create(service, pod, "a", "ctr-4"))
    assert (shares, quota) == (EXPECTED["a"][0], -1)
    assert hook.runs == runs + 2


def test_other_pods_do_not_count_but_the_node_does() -> None:
    hook = CountingBatch()
    store, service, _ = _world(hook)
    pod = be_pod()
    _create(service, pod, "a", "ctr-1")
    store.upsert_pod(PodRecord(uid="other", namespace="default", name="other"))  # the pod map moves
    _create(service, pod, "a", "ctr-2")
    assert hook.runs == 1
    store.set_node(NodeRecord(name="n", annotations={"node.koordinator.sh/cpu-normalization-ratio": "2"}))
    _shares, quota, _memory = _values(_create(service, pod, "a", "ctr-3"))
    assert hook.runs == 2 and quota == EXPECTED["a"][1] // 2  # the new ratio applies at once


def test_a_plugin_that_does_not_declare_purity_runs_every_time() -> None:
    hook = CountingBatch(pure=False)
    _store, service, _ = _world(hook)
    pod = be_pod()
    for i in range(3):
        assert _values(_create(service, pod, "a", f"ctr-{i}")) == EXPECTED["a"]
    assert hook.runs == 3
    assert service._status.as_dict()["decision_memo"]["hits"] == 0


def test_a_failed_outcome_is_never_reused() -> None:
    broken = Broken()
    _store, service, _ = _world(broken)
    pod = be_pod()
    for i in range(3):
        assert _create(service, pod, "a", f"ctr-{i}").ByteSize() == 0  # Ignore: "no change"
    assert broken.runs == 3


# -- the memo on its own --------------------------------------------------------------------------
def _outcome(shares: int) -> StageOutcome:
    return StageOutcome(Stage.PRE_CREATE_CONTAINER, (), Resources(cpu_shares=shares), {}, 0.0, 0)


def test_the_memo_keys_on_identity_not_equality() -> None:
    memo, handlers, view = StageMemo(), (("X", None),), NodeView.build()
    pod = PodRequest(namespace="ns", name="p", uid="u")
    resources = Resources(cpu_shares=2)
    request = ContainerRequest(pod=pod, name="a", resources=resources)
    memo.put(Stage.PRE_CREATE_CONTAINER, handlers, request, view, _outcome(512))
    hit = memo.get(Stage.PRE_CREATE_CONTAINER, handlers, request, view)
    assert hit is not None and hit.resources.cpu_shares == 512
    equal_pod = PodRequest(namespace="ns", name="p", uid="u")
    for other in (
        ContainerRequest(pod=equal_pod, name="a", resources=resources),  # an equal pod, another object
        ContainerRequest(pod=pod, name="a", resources=Resources(cpu_shares=2)),  # equal resources, another object
        ContainerRequest(pod=pod, name="b", resources=resources),
    ):
        assert memo.get(Stage.PRE_CREATE_CONTAINER, handlers, other, view) is None
    assert memo.get(Stage.PRE_CREATE_CONTAINER, handlers, request, NodeView.build(node_slo=view.node_slo)) is not None
    assert memo.get(Stage.PRE_CREATE_CONTAINER, handlers, request, NodeView.build(node=NodeRecord(name="n"))) is None
    other_slo = NodeSLOSpec.model_validate({})
    assert memo.get(Stage.PRE_CREATE_CONTAINER, handlers, request, NodeView.build(node_slo=other_slo)) is None
    rebuilt = tuple([("X", None)])  # an equal handler table, rebuilt (the registry rebuilds it on any change)
    assert memo.get(Stage.PRE_CREATE_CONTAINER, rebuilt, request, view) is None
    assert memo.get(Stage.PRE_UPDATE_CONTAINER_RESOURCES, handlers, request, view) is None


def test_the_memo_is_bounded() -> None:
    memo, handlers, view = StageMemo(max_entries=4), (), NodeView.build()
    pod = PodRequest(namespace="ns", name="p", uid="u")
    for i in range(10):
        memo.put(Stage.PRE_CREATE_CONTAINER, handlers, ContainerRequest(pod=pod, name=f"c{i}"), view, _outcome(i))
        assert len(memo) <= 4


def test_registry_memoizes_a_stage_only_when_every_hook_is_pure() -> None:
    assert HookRegistry([CountingBatch()]).memoizable(Stage.PRE_CREATE_CONTAINER)  # type: ignore[list-item]
    mixed = HookRegistry([CountingBatch(), Broken()])  # type: ignore[list-item]
    assert mixed.memoizable(Stage.PRE_CREATE_CONTAINER)
    impure = HookRegistry([CountingBatch(), type("Impure", (), {"name": "Impure", "pre_create_container": lambda s, r, v: None})()])  # type: ignore[list-item]
    assert not impure.memoizable(Stage.PRE_CREATE_CONTAINER)
    assert not HookRegistry([CountingBatch()]).memoizable(Stage.PRE_RUN_POD_SANDBOX)  # type: ignore[list-item]


def test_the_encoded_reply_is_memoized_by_identity_and_still_right_for_an_equal_value() -> None:
    from hookserver.nri.translate import adjustment_bytes, adjustment_for

    value = Resources(cpu_shares=512, cpu_quota_us=100000, memory_limit_bytes=1 << 30)
    first = adjustment_bytes(value, {})
    assert adjustment_bytes(value, {}) is first  # the same object: the identity memo
    equal = Resources(cpu_shares=512, cpu_quota_us=100000, memory_limit_bytes=1 << 30)
    assert adjustment_bytes(equal, {}) == first == adjustment_for(value, {}).SerializeToString()
    other = adjustment_bytes(Resources(cpu_shares=1024), {})
    assert nri_pb2.CreateContainerResponse.FromString(other).adjust.linux.resources.cpu.shares.value == 1024
    with_env = adjustment_bytes(value, {"A": "1"})
    assert [(e.key, e.value) for e in nri_pb2.CreateContainerResponse.FromString(with_env).adjust.env] == [("A", "1")]
