"""`hookctl explain` says where a container's requests and limits came from (issue 21): the pod spec, or,
for a pod known only from the proxy or NRI, the resources the runtime announced."""

from __future__ import annotations

from hookserver.debug.views import explain_view
from hookserver.dispatch import HookDispatcher
from hookserver.hooks import ContainerRequest, HookRegistry, PodRequest, Stage
from hookserver.hooks.plugins import BatchResourcePlugin
from hookserver.resources import Resources
from hookserver.store import StateStore
from hookserver.store.records import PodRecord

from tests.reference_example import PlanRecorder

UID = "6f1c2d3e-0000-4000-8000-0000000a5a01"


def _dispatched(store: StateStore) -> None:
    dispatcher = HookDispatcher(registry=HookRegistry([BatchResourcePlugin()]), store=store, executor=PlanRecorder())
    pod = PodRequest("web", "solo", UID, labels={"koordinator.sh/qosClass": "LS"},
                     cgroup_parent=f"/kubepods/burstable/pod{UID}", sandbox_id="sb")
    dispatcher.dispatch_pod(Stage.PRE_RUN_POD_SANDBOX, pod, door="proxy", rpc="PreRunPodSandboxHook")
    announced = Resources(cpu_shares=512, cpu_quota_us=50_000, cpu_period_us=100_000, memory_limit_bytes=256 << 20)
    dispatcher.dispatch_container(Stage.PRE_CREATE_CONTAINER, ContainerRequest(pod, "app", container_id="c-app",
                                                                               resources=announced),
                                  door="proxy", rpc="PreCreateContainerHook")


def test_explain_names_the_runtime_as_the_source_without_a_pod_spec() -> None:
    store = StateStore()
    _dispatched(store)
    doc = explain_view(store, "web", "solo")
    [row] = doc["pod"]["resources"]
    assert row == {"container": "app", "source": "runtime (proxy)", "requests": {"cpu": "500m"},
                   "limits": {"cpu": "500m", "memory": str(256 << 20)}}


def test_the_pod_spec_wins_once_the_apiserver_gives_it() -> None:
    store = StateStore()
    _dispatched(store)
    pod = store.snapshot().pod_by_key("web", "solo")
    assert pod is not None
    store.merge_pod(PodRecord(uid=UID, namespace="web", name="solo", source="apiserver",
                              container_specs={"app": ({"cpu": "1"}, {"cpu": "2"})}))
    [row] = explain_view(store, "web", "solo")["pod"]["resources"]
    assert row["source"] == "pod spec" and row["limits"] == {"cpu": "2"}
