"""deploy/hookserver*.yaml against a real kube-apiserver: a server-side dry run (dryRun=All) of every
object, which runs defaulting, validation and admission exactly as a real `kubectl apply` would, and
persists nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hookserver import __version__
from tests.kube.conftest import suffix
from tests.kube.kubehttp import KubeHttp
from tests.kube.manifests import collection_path, load, manifests, relocate


@pytest.mark.parametrize("manifest", manifests(), ids=lambda p: p.name)
def test_every_object_passes_a_server_side_dry_run(kube: KubeHttp, kube_namespace: str, manifest: Path) -> None:
    tag = suffix()
    kinds = []
    for original in load(manifest):
        doc = relocate(original, namespace=kube_namespace, tag=tag)
        path = collection_path(kube, doc)
        reply = kube.post(path, doc, dryRun="All")
        assert reply.status == 201, f"{doc['kind']}/{doc['metadata']['name']}: HTTP {reply.status}: {reply.reason()}"
        # A dry run answers with the object as it would be stored, and stores nothing.
        assert reply.body["kind"] == doc["kind"]
        assert kube.get(f"{path}/{doc['metadata']['name']}").status == 404
        kinds.append(doc["kind"])
        if doc["kind"] == "DaemonSet":
            pod = reply.body["spec"]["template"]["spec"]
            container = pod["containers"][0]
            assert container["image"] == f"hookserver:{__version__}"
            security = container["securityContext"]
            assert security["capabilities"] == {"drop": ["ALL"]} and security["privileged"] is False
            assert security["readOnlyRootFilesystem"] is True and security["runAsUser"] == 0
            assert pod["serviceAccountName"] == "hookserver"
            # Admission resolves the class only for pods; here it must at least exist.
            klass = pod["priorityClassName"]
            assert kube.get(f"/apis/scheduling.k8s.io/v1/priorityclasses/{klass}").ok, klass
    assert {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Role",
            "RoleBinding"} <= set(kinds)


def test_a_broken_object_is_refused_by_the_same_path(kube: KubeHttp, kube_namespace: str) -> None:
    """The dry run is a real check: the same request with an invalid DaemonSet is refused (422)."""
    daemonset = next(d for d in load(manifests()[0]) if d["kind"] == "DaemonSet")
    doc = relocate(daemonset, namespace=kube_namespace, tag=suffix())
    doc["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"] = {"add": ["NOT A CAP"]}
    doc["spec"]["selector"]["matchLabels"] = {"app": "something-else"}
    reply = kube.post(collection_path(kube, doc), doc, dryRun="All")
    assert reply.status == 422, reply.reason()
    assert "selector" in str(reply.body.get("message", ""))


def test_the_admin_api_client_fixture_reaches_the_same_apiserver(kube_api: Any, kube_namespace: str) -> None:
    """`kube_api` (kubernetes.client.ApiClient) is the fixture other tests of this tier build typed clients on."""
    from kubernetes import client

    namespace = client.CoreV1Api(kube_api).read_namespace(kube_namespace)
    assert namespace.metadata.name == kube_namespace
    assert namespace.metadata.labels["hookserver-e2e"] == "true"
