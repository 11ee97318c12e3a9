"""The agent's RBAC (deploy/hookserver.yaml) is enough, and no more: the real informer runs with a token
of the ServiceAccount (TokenRequest) bound to the manifest's ClusterRole, and to its Role on the
slo-controller-config ConfigMap (in a unique namespace standing in for koordinator-system), every verb the
agent and the areas built on it use is allowed, and what it must never touch is refused by the real
authorizer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from hookserver.config import Settings
from hookserver.informer import build_informer
from hookserver.store import StateStore
from tests.informer.conftest import fast_informer_settings
from tests.kube.conftest import SLO_API, NodeFactory, make_namespace, pod_body, suffix
from tests.kube.kubehttp import KubeHttp
from tests.kube.manifests import collection_path, load, manifests, relocate

ACCOUNT = "hookserver"
SLO_CONFIGMAP = "slo-controller-config"
APPLY = "application/apply-patch+yaml"
APPLY_QUERY = {"fieldManager": "hookserver", "force": "false"}


@dataclass
class Agent:
    namespace: str
    client: KubeHttp      # the ServiceAccount's own token
    kubeconfig: str
    koordinator_namespace: str  # where the Role grants the slo-controller-config ConfigMap

    @property
    def slo_configmap(self) -> str:
        return f"{self.koordinator_namespace}/{SLO_CONFIGMAP}"


@pytest.fixture
def koordinator_namespace(kube: KubeHttp) -> Iterator[str]:
    """A unique stand-in for koordinator-system (which the manifest does not create), as kube_namespace does."""
    name = make_namespace(kube, "hookserver-e2e-koord")
    try:
        yield name
    finally:
        kube.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def agent(kube: KubeHttp, kube_namespace: str, koordinator_namespace: str, tmp_path: Path) -> Iterator[Agent]:
    tag = suffix()
    docs = load(manifests()[0])
    created: list[str] = []
    try:
        for original in docs:
            if original["kind"] not in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
                continue
            doc = relocate(original, namespace=kube_namespace, tag=tag, koordinator_namespace=koordinator_namespace)
            path = collection_path(kube, doc)
            kube.must(kube.post(path, doc), f"create {doc['kind']}")
            created.append(f"{path}/{doc['metadata']['name']}")
        token_reply = kube.post(
            f"/api/v1/namespaces/{kube_namespace}/serviceaccounts/{ACCOUNT}/token",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}},
        )
        if not token_reply.ok:
            pytest.skip(f"TokenRequest is not available on this apiserver: HTTP {token_reply.status}")
        client = kube.as_token(token_reply.body["status"]["token"])
        _wait_until_authorized(client, koordinator_namespace)
        yield Agent(kube_namespace, client, client.kubeconfig(str(tmp_path), "agent-kubeconfig"), koordinator_namespace)
    finally:
        for path in reversed(created):
            kube.delete(path)


def _wait_until_authorized(client: KubeHttp, koordinator_namespace: str) -> None:
    """The authorizer learns new bindings from its informers (the ClusterRoleBinding and the RoleBinding from
    two different ones): wait for both, as a restarted agent would."""
    deadline = time.monotonic() + 15
    probes = {
        "the ClusterRoleBinding": ("/api/v1/nodes", {"limit": "1"}),
        "the RoleBinding": (f"/api/v1/namespaces/{koordinator_namespace}/configmaps",
                            {"fieldSelector": f"metadata.name={SLO_CONFIGMAP}"}),
    }
    for what, (path, query) in probes.items():
        while client.get(path, **query).status == 403:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not take effect within 15 s")
            time.sleep(0.1)


def test_the_informer_syncs_everything_with_the_service_accounts_token(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None
) -> None:
    node = kube_nodes.make("rbac")["metadata"]["name"]
    ns = agent.namespace
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("be-1", node, qos="BE")), "pod")
    kube.must(kube.post(f"{SLO_API}/nodeslos", {
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": node},
        "spec": {"cpuBurstStrategy": {"policy": "cpuBurstOnly"}}}), "nodeslo")
    kube.must(kube.post(f"{SLO_API}/nodemetrics", {
        "apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 45}}}), "nodemetric")
    kube.must(kube.post(f"/api/v1/namespaces/{agent.koordinator_namespace}/configmaps", {
        "metadata": {"name": SLO_CONFIGMAP},
        "data": {"colocation-config": json.dumps({"enable": True, "cpuReclaimThresholdPercent": 45})}}), "configmap")

    async def scenario() -> None:
        store = StateStore()
        settings = Settings(node_name=node, kubeconfig=agent.kubeconfig,
                            informer=fast_informer_settings(slo_configmap=agent.slo_configmap))
        informer = build_informer(settings, store=store, registry=CollectorRegistry())
        stop = asyncio.Event()
        task = asyncio.create_task(informer.run(stop))
        try:
            synced = await informer.wait_synced(20)
            status = informer.status()
            assert synced, status
            for source in status["sources"]:
                assert source["connected"] and not source.get("absent"), source
                assert source["errors"] == 0, source
            snap = store.snapshot()
            assert [p.name for p in snap.pods.values()] == ["be-1"]
            assert snap.node is not None and snap.node.name == node
            assert snap.node_slo.cpu_burst_strategy.policy == "cpuBurstOnly"
            assert snap.node_metric is not None
            assert snap.node_metric.metric_collect_policy.report_interval_seconds == 45
            assert snap.colocation.enabled and snap.colocation.strategy.cpu_reclaim_threshold_percent == 45
            assert {s["resource"] for s in status["sources"]} >= {"slo-configmap"}
        finally:
            stop.set()
            await asyncio.wait_for(task, 10)

    asyncio.run(scenario())


def test_every_verb_the_agent_uses_is_allowed(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None
) -> None:
    sa = agent.client
    ns = agent.namespace
    koord = agent.koordinator_namespace
    node = kube_nodes.make("verbs")["metadata"]["name"]
    kube.must(kube.post(f"/api/v1/namespaces/{koord}/configmaps", {"metadata": {"name": SLO_CONFIGMAP},
                                                                   "data": {"colocation-config": "{}"}}), "configmap")
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("victim", node, qos="BE")), "pod")
    kube.must(kube.post(f"{SLO_API}/nodeslos", {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
                                                 "metadata": {"name": node}, "spec": {}}), "nodeslo")
    kube.must(kube.post(f"{SLO_API}/nodemetrics", {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                                                    "metadata": {"name": node}, "spec": {}}), "nodemetric")
    checks = {
        "list pods on the node": sa.get("/api/v1/pods", fieldSelector=f"spec.nodeName={node}"),
        "watch pods on the node": sa.get("/api/v1/pods", fieldSelector=f"spec.nodeName={node}", watch="true",
                                         timeoutSeconds="1"),
        "get a pod": sa.get(f"/api/v1/namespaces/{ns}/pods/victim"),
        "get the node": sa.get(f"/api/v1/nodes/{node}"),
        "list/watch the node": sa.get("/api/v1/nodes", fieldSelector=f"metadata.name={node}", watch="true",
                                      timeoutSeconds="1"),
        "get NodeSLO": sa.get(f"{SLO_API}/nodeslos/{node}"),
        "watch NodeSLO": sa.get(f"{SLO_API}/nodeslos", fieldSelector=f"metadata.name={node}", watch="true",
                                timeoutSeconds="1"),
        "list the slo-controller-config ConfigMap by name": sa.get(
            f"/api/v1/namespaces/{koord}/configmaps", fieldSelector=f"metadata.name={SLO_CONFIGMAP}"),
        "watch the slo-controller-config ConfigMap by name": sa.get(
            f"/api/v1/namespaces/{koord}/configmaps", fieldSelector=f"metadata.name={SLO_CONFIGMAP}", watch="true",
            timeoutSeconds="1"),
        "get the slo-controller-config ConfigMap": sa.get(f"/api/v1/namespaces/{koord}/configmaps/{SLO_CONFIGMAP}"),
        "get NodeMetric": sa.get(f"{SLO_API}/nodemetrics/{node}"),
        "get NodeMetric status": sa.get(f"{SLO_API}/nodemetrics/{node}/status"),
        "patch NodeMetric status": sa.merge_patch(f"{SLO_API}/nodemetrics/{node}/status", {"status": {
            "updateTime": "2026-01-01T00:00:00Z", "nodeMetric": {"nodeUsage": {"resources": {"cpu": "1500m"}}}}}),
        "create an event": sa.post(f"/api/v1/namespaces/{ns}/events", {
            "metadata": {"name": f"victim.{suffix()}"}, "involvedObject": {"kind": "Pod", "namespace": ns,
                                                                          "name": "victim"},
            "reason": "Test", "message": "rbac", "type": "Normal", "count": 1,
            "source": {"component": "hookserver", "host": node}}),
        "create an events.k8s.io event": sa.post(f"/apis/events.k8s.io/v1/namespaces/{ns}/events", {
            "metadata": {"name": f"victim.{suffix()}"}, "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "hookserver", "reportingInstance": f"hookserver-{node}", "action": "Test",
            "reason": "Test", "type": "Normal", "note": "rbac",
            "regarding": {"kind": "Pod", "namespace": ns, "name": "victim"}}),
    }
    for what, reply in checks.items():
        assert reply.ok, f"{what}: HTTP {reply.status}: {reply.reason()}"
    listed = checks["list the slo-controller-config ConfigMap by name"].body["items"]
    assert [c["metadata"]["name"] for c in listed] == [SLO_CONFIGMAP]
    # The kubelet /pods source (kubelet mode, secure port) is authorized by the kubelet as nodes/proxy get;
    # no kubelet runs here, so ask the apiserver's authorizer the kubelet's question directly.
    review = sa.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "get", "resource": "nodes", "subresource": "proxy", "name": node}}})
    assert review.ok and review.body["status"]["allowed"] is True, review.body
    # The device publisher's server-side apply of its node's Device (create, then patch); asked of the
    # authorizer, so the test needs no Device CRD installed.
    for verb in ("create", "patch"):
        assert _allowed(sa, verb, "scheduling.koordinator.sh", "devices", node), f"{verb} devices"
    event = checks["create an event"].body["metadata"]["name"]
    patched = sa.request("PATCH", f"/api/v1/namespaces/{ns}/events/{event}", {"count": 2},
                         content_type="application/strategic-merge-patch+json")
    assert patched.ok and patched.body["count"] == 2, patched.reason()
    new_event = checks["create an events.k8s.io event"].body["metadata"]["name"]
    patched = sa.merge_patch(f"/apis/events.k8s.io/v1/namespaces/{ns}/events/{new_event}",
                             {"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}})
    assert patched.ok, patched.reason()
    # The status write changed the status and nothing else.
    metric = kube.get(f"{SLO_API}/nodemetrics/{node}").body
    assert metric["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] == "1500m"
    assert metric["spec"] == {}
    # Eviction: 1.20 serves policy/v1beta1 (policy/v1 from 1.22); the pod is deleted through it.
    evicted = sa.post(f"/api/v1/namespaces/{ns}/pods/victim/eviction", {
        "apiVersion": "policy/v1beta1", "kind": "Eviction", "metadata": {"name": "victim", "namespace": ns}})
    assert evicted.status == 201, evicted.reason()
    after = kube.get(f"/api/v1/namespaces/{ns}/pods/victim")
    assert after.status == 404 or after.body["metadata"].get("deletionTimestamp")


def test_what_the_agent_must_never_do_is_forbidden(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None
) -> None:
    sa = agent.client
    ns = agent.namespace
    node = kube_nodes.make("deny")["metadata"]["name"]
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/pods", pod_body("keep", node)), "pod")
    kube.must(kube.post(f"{SLO_API}/nodeslos", {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
                                                 "metadata": {"name": node}, "spec": {}}), "nodeslo")
    kube.must(kube.post(f"{SLO_API}/nodemetrics", {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                                                    "metadata": {"name": node}, "spec": {}}), "nodemetric")
    kube.must(kube.post(f"/api/v1/namespaces/{ns}/secrets", {"metadata": {"name": "s"}, "stringData": {"k": "v"}}),
              "secret")
    koord = agent.koordinator_namespace
    for where, name in ((koord, SLO_CONFIGMAP), (koord, "other"), (ns, SLO_CONFIGMAP)):
        kube.must(kube.post(f"/api/v1/namespaces/{where}/configmaps", {"metadata": {"name": name},
                                                                      "data": {"colocation-config": "{}"}}), name)
    koord_cms = f"/api/v1/namespaces/{koord}/configmaps"
    by_name = f"metadata.name={SLO_CONFIGMAP}"
    node_object = kube.must(kube.get(f"/api/v1/nodes/{node}"), "get node")
    metric_object = kube.must(kube.get(f"{SLO_API}/nodemetrics/{node}"), "get nodemetric")
    denied = {
        "get another ConfigMap in koordinator's namespace": sa.get(f"{koord_cms}/other"),
        "list another ConfigMap by name there": sa.get(koord_cms, fieldSelector="metadata.name=other"),
        "list every ConfigMap there": sa.get(koord_cms),
        "watch every ConfigMap there": sa.get(koord_cms, watch="true", timeoutSeconds="1"),
        "get the ConfigMap's name in another namespace": sa.get(f"/api/v1/namespaces/{ns}/configmaps/{SLO_CONFIGMAP}"),
        "list it by name in another namespace": sa.get(f"/api/v1/namespaces/{ns}/configmaps", fieldSelector=by_name),
        "list it by name cluster-wide": sa.get("/api/v1/configmaps", fieldSelector=by_name),
        "patch the slo-controller-config": sa.merge_patch(f"{koord_cms}/{SLO_CONFIGMAP}", {"data": {"x": "y"}}),
        "delete the slo-controller-config": sa.delete(f"{koord_cms}/{SLO_CONFIGMAP}"),
        "create a ConfigMap there": sa.post(koord_cms, {"metadata": {"name": "intruder"}}),
        "list secrets in a namespace": sa.get(f"/api/v1/namespaces/{ns}/secrets"),
        "list secrets cluster-wide": sa.get("/api/v1/secrets"),
        "get a secret": sa.get(f"/api/v1/namespaces/{ns}/secrets/s"),
        "list configmaps": sa.get(f"/api/v1/namespaces/{ns}/configmaps"),
        "create a pod": sa.post(f"/api/v1/namespaces/{ns}/pods", pod_body("intruder", node)),
        "delete a pod directly": sa.delete(f"/api/v1/namespaces/{ns}/pods/keep"),
        "patch a pod": sa.merge_patch(f"/api/v1/namespaces/{ns}/pods/keep", {"metadata": {"labels": {"x": "y"}}}),
        "patch the node": sa.merge_patch(f"/api/v1/nodes/{node}", {"metadata": {"labels": {"x": "y"}}}),
        "apply the node (main resource)": sa.request(
            "PATCH", f"/api/v1/nodes/{node}", {"apiVersion": "v1", "kind": "Node", "metadata": {
                "name": node, "labels": {"x": "y"}}}, query=APPLY_QUERY, content_type=APPLY),
        "update the node": sa.put(f"/api/v1/nodes/{node}", node_object),
        "update node status (PUT: patch only)": sa.request("PUT", f"/api/v1/nodes/{node}/status", node_object),
        "create a node": sa.post("/api/v1/nodes", {"metadata": {"name": f"x-{node}"}}),
        "delete the node": sa.delete(f"/api/v1/nodes/{node}"),
        "create a NodeSLO": sa.post(f"{SLO_API}/nodeslos", {"apiVersion": "slo.koordinator.sh/v1alpha1",
                                                            "kind": "NodeSLO", "metadata": {"name": f"x-{node}"}}),
        "patch NodeSLO spec": sa.merge_patch(f"{SLO_API}/nodeslos/{node}", {"spec": {"x": 1}}),
        "update NodeMetric": sa.put(f"{SLO_API}/nodemetrics/{node}", metric_object),
        "update NodeMetric status (PUT)": sa.request("PUT", f"{SLO_API}/nodemetrics/{node}/status", metric_object),
        "delete NodeMetric": sa.delete(f"{SLO_API}/nodemetrics/{node}"),
        "delete every NodeMetric": sa.delete(f"{SLO_API}/nodemetrics"),
        "list serviceaccounts": sa.get(f"/api/v1/namespaces/{ns}/serviceaccounts"),
        "delete events": sa.delete(f"/api/v1/namespaces/{ns}/events/none"),
        "read RBAC": sa.get("/apis/rbac.authorization.k8s.io/v1/clusterroles"),
    }
    wrong = {what: f"HTTP {r.status}" for what, r in denied.items() if r.status != 403}
    assert not wrong, wrong
    # nodes/proxy is granted for get only: create on it is the kubelet's exec/run/attach, and must stay refused.
    review = sa.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "create", "resource": "nodes", "subresource": "proxy", "name": node}}})
    assert review.ok and review.body["status"].get("allowed") is False, review.body
    # Devices: no read, update or delete (a Device goes with its Node by its ownerReference).
    for verb in ("get", "list", "watch", "update", "delete", "deletecollection"):
        assert not _allowed(sa, verb, "scheduling.koordinator.sh", "devices", node), f"{verb} devices"
    # and the refusals changed nothing
    assert kube.get(f"/api/v1/namespaces/{ns}/pods/keep").ok
    assert kube.get(f"{SLO_API}/nodemetrics/{node}").body["spec"] == {}
    assert kube.get(f"{koord_cms}/{SLO_CONFIGMAP}").body["data"] == {"colocation-config": "{}"}
    after = kube.get(f"/api/v1/nodes/{node}").body
    assert after["metadata"]["resourceVersion"] == node_object["metadata"]["resourceVersion"]


def _allowed(sa: KubeHttp, verb: str, group: str, resource: str, name: str) -> bool:
    """The apiserver's authorizer asked for the account (SelfSubjectAccessReview)."""
    review = sa.post("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": verb, "group": group, "resource": resource, "name": name}}})
    assert review.ok, review.reason()
    return review.body["status"].get("allowed") is True


def test_the_writers_apply_with_the_service_accounts_token(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None
) -> None:
    """The capacity publisher's server-side apply of its node's status, and the NodeMetric keeper's create
    and update of its node's NodeMetric, through the real writers with the account's token. (A merge patch
    of nodes/status is allowed too: RBAC has no patch-type dimension; field ownership keeps us off the
    kubelet's fields, see tests/kube/test_node_capacity_kube.py.)"""
    from hookserver.informer import NodeCapacityWriter, NodeMetricSpecWriter
    from hookserver.informer.transport import ApiClientTransport, load_client_configuration

    node = kube_nodes.make("writers")["metadata"]["name"]
    transport = ApiClientTransport(load_client_configuration(agent.kubeconfig))
    capacity = NodeCapacityWriter(transport, node_name=node)
    published = capacity.apply({"kubernetes.io/batch-cpu": "1500", "kubernetes.io/batch-memory": "2Gi"})
    assert published.result == "ok", published.detail
    status = kube.get(f"/api/v1/nodes/{node}").body["status"]
    assert status["allocatable"]["kubernetes.io/batch-cpu"] == status["capacity"]["kubernetes.io/batch-cpu"] == "1500"
    assert capacity.withdraw().result == "ok"
    assert "kubernetes.io/batch-cpu" not in kube.get(f"/api/v1/nodes/{node}").body["status"]["capacity"]
    spec_writer = NodeMetricSpecWriter(transport, node_name=node)
    spec = {"metricCollectPolicy": {"reportIntervalSeconds": 60, "aggregateDurationSeconds": 300}}
    created = spec_writer.ensure(spec)  # no NodeMetric yet: the apply creates it (create)
    assert created.result == "created", created.detail
    updated = spec_writer.ensure({"metricCollectPolicy": {"reportIntervalSeconds": 30}})  # and changes it (patch)
    assert updated.result == "updated", updated.detail
    assert spec_writer.ensure({"metricCollectPolicy": {"reportIntervalSeconds": 30}}).result == "unchanged"
    assert kube.get(f"{SLO_API}/nodemetrics/{node}").body["spec"] == {"metricCollectPolicy": {"reportIntervalSeconds": 30}}
    transport.close()


def test_the_agent_process_runs_with_the_service_accounts_token(
    agent: Agent, kube: KubeHttp, kube_nodes: NodeFactory, slo_crds: None, tmp_path: Path
) -> None:
    """`hookserver serve` in cluster mode (not standalone), its kubeconfig holding only the account's
    token: every informer source connects with no error, and hookctl sees this node's pod."""
    node = kube_nodes.make("agent")["metadata"]["name"]
    kube.must(kube.post(f"/api/v1/namespaces/{agent.namespace}/pods", pod_body("be-1", node, qos="BE")), "pod")
    run = tmp_path / "run"
    log_path = tmp_path / "agent.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hookserver.cli.serve", "serve", "--no-nri", "--kubeconfig", agent.kubeconfig,
             "--node-name", node, "--hook-socket", str(run / "hook.sock"), "--debug-socket", str(run / "debug.sock"),
             "--registration-dir", str(run / "reg"), "--state-dir", str(run / "state"),
             "--metrics-addr", "127.0.0.1:0"],
            stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "HOOKSERVER_INFORMER__SLO_CONFIGMAP": agent.slo_configmap},
        )
        try:
            deadline = time.monotonic() + 60
            status: dict[str, Any] = {}
            while time.monotonic() < deadline and proc.poll() is None:
                done = subprocess.run(
                    [sys.executable, "-m", "hookserver.cli.hookctl", "--socket", str(run / "debug.sock"),
                     "--timeout", "2", "status", "-o", "json"], capture_output=True, text=True, timeout=30,
                )
                if done.returncode == 0:
                    status = json.loads(done.stdout)
                    if status.get("informer", {}).get("synced"):
                        break
                time.sleep(0.3)
            informer = status.get("informer", {})
            assert informer.get("synced") and informer.get("mode") == "apiserver", log_path.read_text()[-3000:]
            for source in informer["sources"]:
                assert source["connected"] and source["errors"] == 0 and not source.get("absent"), source
            pods = subprocess.run(
                [sys.executable, "-m", "hookserver.cli.hookctl", "--socket", str(run / "debug.sock"), "pods",
                 "-o", "json"], capture_output=True, text=True, timeout=30,
            )
            assert pods.returncode == 0 and [p["pod"] for p in json.loads(pods.stdout)] == [f"{agent.namespace}/be-1"], pods.stdout
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
    # "HTTP 403", not "403": a log line's milliseconds (01:51:57,403) or a duration may contain those digits.
    text = log_path.read_text()
    assert "HTTP 403" not in text and "Forbidden" not in text, text[-3000:]
