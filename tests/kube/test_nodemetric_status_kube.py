"""The NodeMetric status writer against a real kube-apiserver (v1.20, /tmp/kube-e2e): the status subresource,
schema pruning by a structural schema written from koordinator's types, a real 409 conflict, and a missing CRD.

Skipped unless HOOKSERVER_E2E_KUBECONFIG points at the shared test apiserver. Objects are named
`i8-<random>`; the shared slo.koordinator.sh CRD is used as found (created from tests/kube/crds/ only if
absent, never changed or deleted). The schema check uses a private copy of our CRD under its own group.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

KUBECONFIG = os.environ.get("HOOKSERVER_E2E_KUBECONFIG", "")
pytestmark = pytest.mark.skipif(not KUBECONFIG, reason="HOOKSERVER_E2E_KUBECONFIG is not set (no test apiserver)")

CRD_FILE = Path(__file__).parent / "crds" / "nodemetrics.yaml"
GROUP = "slo.koordinator.sh"
PRIVATE_GROUP = "slo-i8-schema.hookserver.test"

# koordlet's GPU entry in a ResourceMap's `devices` (hookserver/predictor/nodemetric_gpu.py).
GPU = {"type": "gpu", "id": "GPU-0d1e", "minor": 1, "health": True,
       "resources": {"koordinator.sh/gpu-core": "35", "koordinator.sh/gpu-memory": "10752Mi",
                     "koordinator.sh/gpu-memory-ratio": "13"}}

STATUS: dict[str, Any] = {
    "updateTime": "2026-11-23T08:00:00Z",
    "nodeMetric": {
        "nodeUsage": {"resources": {"cpu": "1500m", "memory": "2Gi"}, "devices": [GPU]},
        "aggregatedNodeUsages": [{"usage": {a: {"resources": {"cpu": "1", "memory": "1Gi"}} for a in
                                            ("avg", "p50", "p90", "p95", "p99")}, "duration": "5m0s"},
                                 {"usage": {a: {} for a in ("avg", "p50", "p90", "p95", "p99")}, "duration": "30m0s"}],
        "systemUsage": {"resources": {"cpu": "250m", "memory": "512Mi"}},
    },
    "podsMetric": [{"name": "web", "namespace": "i8", "podUsage": {"resources": {"cpu": "1", "memory": "1Gi"},
                                                                  "devices": [GPU]},
                    "priority": "koord-prod", "qos": "LS"}],
    "hostApplicationMetric": [{"name": "nginx", "usage": {"resources": {"cpu": "100m", "memory": "100Mi"}},
                               "priority": "koord-prod", "qos": "LS"}],
    "prodReclaimableMetric": {"resource": {"resources": {"cpu": "2", "memory": "3Gi"}}},
    "prodPeakMetric": {"resource": {"resources": {"cpu": "3", "memory": "5Gi"}}},
}


@pytest.fixture(scope="module")
def kube() -> Iterator[Any]:
    from kubernetes import client, config

    config.load_kube_config(KUBECONFIG)
    yield client
    try:  # our private schema-check CRD only; the shared slo.koordinator.sh one is never touched
        client.ApiextensionsV1Api().delete_custom_resource_definition(f"nodemetrics.{PRIVATE_GROUP}")
    except client.ApiException:
        pass


def _crd(kube: Any, group: str) -> dict[str, Any]:
    doc = yaml.safe_load(CRD_FILE.read_text())
    doc = copy.deepcopy(doc)  # YAML anchors share objects: make them independent before editing
    doc["metadata"]["name"] = f"nodemetrics.{group}"
    doc["spec"]["group"] = group
    return doc


def _wait_established(kube: Any, name: str) -> None:
    api = kube.ApiextensionsV1Api()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        crd = api.read_custom_resource_definition(name)
        if any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or [])):
            time.sleep(0.5)  # discovery catches up
            return
        time.sleep(0.2)
    raise AssertionError(f"CRD {name} not established")


def _ensure_crd(kube: Any, group: str, *, shared: bool) -> None:
    api = kube.ApiextensionsV1Api()
    name = f"nodemetrics.{group}"
    try:
        crd = api.read_custom_resource_definition(name)
    except kube.ApiException as exc:
        if exc.status != 404:
            raise
        try:
            api.create_custom_resource_definition(_crd(kube, group))
        except kube.ApiException as create_exc:
            if create_exc.status != 409:  # someone else created it meanwhile
                raise
        _wait_established(kube, name)
        return
    if shared and not all(v.subresources is not None and v.subresources.status is not None for v in crd.spec.versions):
        pytest.skip(f"the shared CRD {name} has no status subresource; not changing another engineer's CRD")


@pytest.fixture
def node_name(kube: Any) -> Iterator[str]:
    name = f"i8-{uuid.uuid4().hex[:8]}"
    yield name
    for group in (GROUP, PRIVATE_GROUP):
        try:
            kube.CustomObjectsApi().delete_cluster_custom_object(group, "v1alpha1", "nodemetrics", name)
        except kube.ApiException:
            pass


def _create(kube: Any, group: str, name: str) -> None:
    kube.CustomObjectsApi().create_cluster_custom_object(group, "v1alpha1", "nodemetrics", {
        "apiVersion": f"{group}/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60, "aggregateDurationSeconds": 300}},
    })


def _get(kube: Any, group: str, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = kube.CustomObjectsApi().get_cluster_custom_object(group, "v1alpha1", "nodemetrics", name)
    return obj


def _writer(node: str, group: str = GROUP, sleeps: list[float] | None = None) -> Any:
    from hookserver.informer.nodemetric_status import NodeMetricStatusWriter
    from hookserver.informer.transport import ApiClientTransport, load_client_configuration

    transport = ApiClientTransport(load_client_configuration(KUBECONFIG))
    return NodeMetricStatusWriter(transport, node_name=node, group_path=f"/apis/{group}/v1alpha1",
                                  sleep=(sleeps.append if sleeps is not None else time.sleep))


def test_status_subresource_on_the_shared_crd(kube: Any, node_name: str) -> None:
    _ensure_crd(kube, GROUP, shared=True)
    _create(kube, GROUP, node_name)
    result = _writer(node_name).deliver(STATUS)
    assert result.result == "ok", result.detail
    obj = _get(kube, GROUP, node_name)
    assert obj["status"] == STATUS
    assert obj["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60  # the spec is untouched
    smaller = {k: v for k, v in STATUS.items() if k not in ("podsMetric", "hostApplicationMetric")}
    assert _writer(node_name).deliver(smaller).result == "ok"
    assert _get(kube, GROUP, node_name)["status"] == smaller  # gone keys really go (merge patch nulls)


def test_every_field_survives_a_schema_written_from_koordinators_types(kube: Any, node_name: str) -> None:
    _ensure_crd(kube, PRIVATE_GROUP, shared=False)
    _create(kube, PRIVATE_GROUP, node_name)
    result = _writer(node_name, PRIVATE_GROUP).deliver(STATUS)
    assert result.result == "ok", result.detail
    assert _get(kube, PRIVATE_GROUP, node_name)["status"] == STATUS  # nothing was pruned
    wrong = copy.deepcopy(STATUS)
    wrong["prodReclaimableMetrics"] = wrong.pop("prodReclaimableMetric")  # a misspelt field is pruned
    wrong["nodeMetric"]["nodeUsage"]["devices"][0]["uuid"] = "GPU-0d1e"  # DeviceInfo's UUID is `id` on the wire
    assert _writer(node_name, PRIVATE_GROUP).deliver(wrong).result == "ok"
    written = _get(kube, PRIVATE_GROUP, node_name)["status"]
    assert "prodReclaimableMetrics" not in written
    assert written["nodeMetric"]["nodeUsage"]["devices"] == [GPU]


def test_a_write_between_read_and_patch_conflicts_and_is_retried(kube: Any, node_name: str) -> None:
    _ensure_crd(kube, GROUP, shared=True)
    _create(kube, GROUP, node_name)
    sleeps: list[float] = []
    writer = _writer(node_name, sleeps=sleeps)
    real_get = writer._transport.get_json
    calls = {"n": 0}

    def racing_get(path: str, params: Any, *, timeout_s: float) -> Any:
        obj = real_get(path, params, timeout_s=timeout_s)
        calls["n"] += 1
        if calls["n"] == 1:  # koord-manager (say) updates the object after our read
            kube.CustomObjectsApi().patch_cluster_custom_object(
                GROUP, "v1alpha1", "nodemetrics", node_name, {"metadata": {"labels": {"touched": "yes"}}})
        return obj

    writer._transport.get_json = racing_get
    result = writer.deliver(STATUS)
    assert (result.result, result.attempts) == ("ok", 2)
    assert len(sleeps) == 1
    obj = _get(kube, GROUP, node_name)
    assert obj["status"] == STATUS and obj["metadata"]["labels"] == {"touched": "yes"}


def test_missing_object_and_missing_crd_are_not_found(kube: Any, node_name: str) -> None:
    _ensure_crd(kube, GROUP, shared=True)
    assert _writer(node_name).deliver(STATUS).result == "not_found"  # no NodeMetric object for this node
    missing = _writer(node_name, "slo-i8-absent.hookserver.test").deliver(STATUS)
    assert missing.result == "not_found" and "404" in missing.detail


def test_the_daemon_reports_through_the_informers_client(kube: Any, node_name: str, tmp_path: Path) -> None:
    from hookserver.config import load_settings
    from hookserver.daemon import Daemon

    _ensure_crd(kube, GROUP, shared=True)
    _create(kube, GROUP, node_name)
    settings = load_settings(overrides={
        "node_name": node_name, "kubeconfig": KUBECONFIG, "state_dir": str(tmp_path / "state"),
        "hook": {"socket": str(tmp_path / "hook.sock"), "registration_dir": str(tmp_path / "reg")},
        "debug": {"socket": str(tmp_path / "debug.sock")}, "metrics": {"addr": "127.0.0.1:0"},
        "nri": {"enabled": False}, "informer": {"source": "apiserver"},
    }, environ={})
    daemon = Daemon(settings)
    assert daemon.reporter is not None and daemon.reporter.sink.target == "apiserver"
    delivery = daemon.reporter.report_once()
    assert delivery.result == "ok", delivery.detail
    status = _get(kube, GROUP, node_name)["status"]
    assert status["updateTime"] and "nodeMetric" in status
    assert daemon.reporter.view()["last_result"] == "ok"


def test_the_deployed_cluster_role_is_enough_to_report(kube: Any, node_name: str) -> None:
    """Impersonate a service account bound only to deploy/hookserver.yaml's ClusterRole."""
    _ensure_crd(kube, GROUP, shared=True)
    _create(kube, GROUP, node_name)
    docs = list(yaml.safe_load_all((Path(__file__).parents[2] / "deploy" / "hookserver.yaml").read_text()))
    role = next(d for d in docs if d and d.get("kind") == "ClusterRole")
    rbac = kube.RbacAuthorizationV1Api()
    name = f"{node_name}-hookserver"
    user = f"system:serviceaccount:i8:{name}"
    rbac.create_cluster_role({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                              "metadata": {"name": name}, "rules": role["rules"]})
    rbac.create_cluster_role_binding({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]})
    try:
        writer = _writer(node_name)
        writer._transport._api.set_default_header("Impersonate-User", user)
        result = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the RBAC cache takes a moment
            result = writer.deliver(STATUS)
            if result.result == "ok":
                break
            time.sleep(0.3)
        assert result is not None and result.result == "ok", result
        stripped = list(role["rules"])
        stripped = [r for r in stripped if "nodemetrics/status" not in r.get("resources", [])]
        rbac.replace_cluster_role(name, {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                         "metadata": {"name": name}, "rules": stripped})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            result = writer.deliver(STATUS)
            if result.result == "error":
                break
            time.sleep(0.3)
        assert result.result == "error" and "403" in result.detail  # the status rule is what grants it
    finally:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)
