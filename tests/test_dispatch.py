"""The dispatcher: failure policy, skip label, pod cgroup writes, audit, and all-or-nothing values."""

from __future__ import annotations

import json

import pytest

from hookserver.dispatch import HookDispatcher, HookRejected
from hookserver.errors import PathEscapeError
from hookserver.executor.plan import ApplyReport, ResourcePlan, WriteResult
from hookserver.hooks import ContainerRequest, FailurePolicy, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.store import StateStore

SPEC = "node.koordinator.sh/extended-resource-spec"
GOOD = {
    SPEC: json.dumps(
        {"containers": {"a": {"requests": {"kubernetes.io/batch-cpu": "500"}, "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}}}}
    )
}


class RecordingExecutor:
    def __init__(self, *, escape: bool = False) -> None:
        self.plans: list[ResourcePlan] = []
        self.escape = escape

    def apply(self, plan: ResourcePlan) -> ApplyReport:
        if self.escape:
            raise PathEscapeError("escapes the cgroup root", path=plan.all_writes()[0].cgroup_dir)
        self.plans.append(plan)
        return ApplyReport(tuple(WriteResult(w, w.cgroup_dir, str(w.value), ok=True) for w in plan.all_writes()))


def make(policy: FailurePolicy = FailurePolicy.IGNORE, **kw: bool) -> tuple[HookDispatcher, StateStore, RecordingExecutor]:
    store = StateStore()
    executor = RecordingExecutor(**kw)
    dispatcher = HookDispatcher(
        registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=executor, policy=policy
    )
    return dispatcher, store, executor


def pod(annotations: dict[str, str], **labels: str) -> PodRequest:
    return PodRequest(
        "ns", "p", "uid-1", labels={"koordinator.sh/qosClass": "BE", **labels}, annotations=annotations,
        cgroup_parent="/kubepods/besteffort/poduid-1",
    )


def test_be_pod_values_are_written_to_the_pod_cgroup_and_audited() -> None:
    dispatcher, store, executor = make()
    result = dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod(GOOD), door="proxy", rpc="PreRunPodSandboxHook")
    assert result.result == "ok"
    writes = {w.resource.value: w.value for w in executor.plans[0].all_writes()}
    assert writes == {"cpu.shares": 512, "cpu.cfs_quota_us": 100000, "memory.limit_in_bytes": 1073741824}
    assert {w.cgroup_dir for w in executor.plans[0].all_writes()} == {"/kubepods/besteffort/poduid-1"}
    decision = store.audit.decisions(pod_key="ns/p")[-1]
    assert decision.plugin == "BatchResource" and decision.applied and decision.values["cpu_shares"] == 512
    assert store.snapshot().pods["uid-1"].qos_class == "BE"
    assert store.audit.events()[-1].result == "ok"


def test_skip_label_runs_no_hook() -> None:
    dispatcher, store, executor = make()
    request = pod(GOOD, **{"runtimeproxy.koordinator.sh/skip-hookserver": "true"})
    result = dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, request, door="proxy", rpc="x")
    assert result.result == "skipped" and executor.plans == [] and store.audit.decisions() == []


def test_ignore_policy_returns_nothing_and_writes_nothing_on_error() -> None:
    dispatcher, store, executor = make()
    result = dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod({SPEC: "{bad"}), door="nri", rpc="RunPodSandbox")
    assert result.result == "error" and result.resources.is_empty()
    assert executor.plans == []
    assert "not valid JSON" in store.audit.events()[-1].error


def test_fail_policy_rejects_with_the_field_named() -> None:
    dispatcher, store, executor = make(FailurePolicy.FAIL)
    request = ContainerRequest(pod=pod(GOOD, **{"koordinator.sh/qosClass": "GOLD"}), name="a")
    with pytest.raises(HookRejected) as info:
        dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, request, door="proxy", rpc="PreCreateContainerHook")
    assert "qosClass" in info.value.field
    assert store.audit.events()[-1].result == "rejected"


def test_path_escape_is_refused_under_both_policies() -> None:
    dispatcher, _, _ = make(escape=True)
    result = dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod(GOOD), door="proxy", rpc="x")
    assert result.result == "error" and result.resources.is_empty() and "escapes" in result.error
    dispatcher, _, _ = make(FailurePolicy.FAIL, escape=True)
    with pytest.raises(HookRejected) as info:
        dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod(GOOD), door="proxy", rpc="x")
    assert info.value.field == "cgroup_parent"


def test_container_lifecycle_updates_the_store() -> None:
    dispatcher, store, _ = make()
    created = ContainerRequest(pod=pod(GOOD), name="a")
    out = dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, created, door="proxy", rpc="c")
    assert out.resources.cpu_shares == 512
    assert "pending:uid-1/a" in store.snapshot().containers
    started = ContainerRequest(pod=pod(GOOD), name="a", container_id="abc")
    dispatcher.dispatch_container(Stage.PRE_START_CONTAINER, started, door="proxy", rpc="s")
    assert set(store.snapshot().containers) == {"abc"}
    dispatcher.dispatch_container(Stage.POST_STOP_CONTAINER, started, door="proxy", rpc="t")
    assert store.snapshot().containers == {}
    dispatcher.dispatch_pod(Stage.POST_STOP_POD_SANDBOX, pod(GOOD), door="proxy", rpc="u")
    assert store.snapshot().pods == {}


def test_informer_copy_fills_gaps_but_never_overrides_the_request() -> None:
    from hookserver.store import PodRecord

    dispatcher, store, executor = make()
    store.upsert_pod(
        PodRecord(
            uid="uid-1", namespace="ns", name="p", labels={"koordinator.sh/qosClass": "BE"}, annotations=GOOD,
            cgroup_parent="/kubepods/besteffort/poduid-1", source="apiserver",
        )
    )
    # A container request after a proxy failover: no pod labels, annotations or cgroup parent.
    bare = ContainerRequest(pod=PodRequest("ns", "p", "uid-1"), name="a")
    out = dispatcher.dispatch_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, bare, door="proxy", rpc="u")
    assert out.resources.cpu_shares == 512 and out.resources.memory_limit_bytes == 1073741824
    # The request's own labels win: an LS label means no batch values even though the copy says BE.
    ls = ContainerRequest(pod=PodRequest("ns", "p", "uid-1", labels={"koordinator.sh/qosClass": "LS"}), name="a")
    out = dispatcher.dispatch_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, ls, door="proxy", rpc="u")
    assert out.resources.is_empty()
    # A pod request without a cgroup parent gets the stored one, so the pod cgroup is still written.
    dispatcher.dispatch_pod(
        Stage.PRE_RUN_POD_SANDBOX, PodRequest("ns", "p", "uid-1", labels={"koordinator.sh/qosClass": "BE"}, annotations=GOOD),
        door="nri", rpc="RunPodSandbox",
    )
    assert executor.plans[-1].all_writes()[0].cgroup_dir == "/kubepods/besteffort/poduid-1"


def test_unchanged_container_keeps_the_snapshot_but_a_change_lands() -> None:
    from hookserver.resources import Resources

    dispatcher, store, _ = make()
    first = ContainerRequest(pod=pod(GOOD), name="a", container_id="c1", resources=Resources(cpu_shares=2))
    dispatcher.dispatch_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, first, door="nri", rpc="u")
    version = store.version
    dispatcher.dispatch_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, first, door="nri", rpc="u")
    assert store.version == version  # nothing new: no store write
    changed = ContainerRequest(pod=pod(GOOD), name="a", container_id="c1", resources=Resources(cpu_shares=512))
    dispatcher.dispatch_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, changed, door="nri", rpc="u")
    assert store.snapshot().containers["c1"].resources.cpu_shares == 512


def test_a_pending_record_is_cleared_by_whichever_dispatcher_sees_the_id() -> None:
    """The pending count is the store's, not one dispatcher's: a second dispatcher on the same store (another
    door, a test harness) still clears the record the first filed while the container had no ID."""
    first, store, _ = make()
    first.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod=pod(GOOD), name="a"), door="proxy",
                             rpc="c")
    assert store.pending_containers == 1
    second = HookDispatcher(registry=first.registry, store=store, executor=None)
    second.dispatch_container(Stage.PRE_START_CONTAINER, ContainerRequest(pod=pod(GOOD), name="a", container_id="abc"),
                              door="nri", rpc="s")
    assert set(store.snapshot().containers) == {"abc"} and store.pending_containers == 0


def test_decisions_on_a_snapshot_fill_gaps_from_that_snapshot_not_the_live_store() -> None:
    """`decide_container`/`decide_pod` decide on the snapshot they are given (a Synchronize's, taken before it;
    the reconciler's pass): the pod's missing labels and annotations come from that snapshot too, not from the
    store as it is now (which the informer may have changed since, and whose snapshot a busy store rebuilds)."""
    from hookserver.store import PodRecord

    dispatcher, store, _ = make()
    store.upsert_pod(
        PodRecord(
            uid="uid-1", namespace="ns", name="p", labels={"koordinator.sh/qosClass": "BE"}, annotations=GOOD,
            cgroup_parent="/kubepods/besteffort/poduid-1", source="apiserver",
        )
    )
    taken = store.snapshot()
    store.upsert_pod(PodRecord(uid="uid-1", namespace="ns", name="p", labels={"koordinator.sh/qosClass": "LS"},
                               annotations={}, cgroup_parent="/kubepods/poduid-1", source="apiserver"))
    bare = ContainerRequest(pod=PodRequest("ns", "p", "uid-1"), name="a")
    out = dispatcher.decide_container(Stage.PRE_UPDATE_CONTAINER_RESOURCES, bare, taken)
    assert out.resources.cpu_shares == 512 and out.resources.memory_limit_bytes == 1073741824
    pod_out = dispatcher.decide_pod(Stage.PRE_RUN_POD_SANDBOX, PodRequest("ns", "p", "uid-1"), taken)
    assert pod_out.resources.cpu_shares == 512
