"""The real-apiserver tier: fixtures for tests that talk to a real kube-apiserver (marker `kube_e2e`).

Conventions for every test under tests/kube/:
  * mark it `kube_e2e` (this conftest marks every test collected here, so `-m kube_e2e` selects them);
  * it runs only when HOOKSERVER_E2E_KUBECONFIG names an admin kubeconfig (bearer token) of a
    kube-apiserver >= 1.20, and is skipped with that reason otherwise (`make test` stays fast;
    `make e2e` runs them and prints what it skipped);
  * use `kube_namespace` for namespaced objects and `kube_nodes.make()` for Node objects: both carry a
    random suffix, so several people can share one apiserver, and both are cleaned up;
  * `kube_api` is a kubernetes.client.ApiClient (admin); `kube` is the raw JSON client
    (tests/kube/kubehttp.py) that returns status codes instead of raising;
  * `slo_crds` installs the NodeSLO and NodeMetric CRDs (tests/kube/crds/) when they are missing;
  * `proxy` is a cuttable TCP proxy in front of the apiserver (`kube.with_server(proxy.url)`), for outages.
A kubeconfig that is set but unreachable is an error, not a skip: someone asked for this tier.
"""

from __future__ import annotations

import os
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kube.kubehttp import KubeHttp
from tests.kube.tcpproxy import CuttableProxy

ENV = "HOOKSERVER_E2E_KUBECONFIG"
CRD_DIR = Path(__file__).parent / "crds"
SLO_API = "/apis/slo.koordinator.sh/v1alpha1"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.kube_e2e)


def suffix() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def kube_kubeconfig() -> str:
    path = os.environ.get(ENV, "")
    if not path:
        pytest.skip(f"{ENV} is not set: no real kube-apiserver to test against (run `make e2e` with it set)")
    if not os.path.isfile(path):
        pytest.fail(f"{ENV}={path}: no such file")
    return path


@pytest.fixture(scope="session")
def kube(kube_kubeconfig: str) -> KubeHttp:
    client = KubeHttp.from_kubeconfig(kube_kubeconfig)
    try:
        version = client.get("/version")
    except OSError as exc:
        pytest.fail(f"{ENV}: {client.server} is unreachable: {exc}")
    if not version.ok:
        pytest.fail(f"{ENV}: GET /version answered HTTP {version.status}: {version.reason()}")
    minor = int(str(version.body.get("minor", "0")).rstrip("+"))
    if minor < 20:
        pytest.skip(f"kube-apiserver {version.body.get('gitVersion')} is older than 1.20")
    return client


@pytest.fixture(scope="session")
def kube_api(kube_kubeconfig: str, kube: KubeHttp) -> Iterator[Any]:
    from kubernetes import config

    api = config.new_client_from_config(config_file=kube_kubeconfig)
    try:
        yield api
    finally:
        api.close()


def make_namespace(kube: KubeHttp, prefix: str = "hookserver-e2e") -> str:
    """A namespace with a random suffix and the hookserver-e2e label (delete it when done)."""
    name = f"{prefix}-{suffix()}"
    kube.must(kube.post("/api/v1/namespaces", {"metadata": {"name": name, "labels": {"hookserver-e2e": "true"}}}),
              f"create namespace {name}")
    return name


@pytest.fixture
def kube_namespace(kube: KubeHttp) -> Iterator[str]:
    name = make_namespace(kube)
    try:
        yield name
    finally:
        # No controller-manager runs in the e2e apiserver: pods are deleted with grace 0 here, and the
        # namespace itself stays Terminating (no namespace controller), which is harmless.
        pods = kube.get(f"/api/v1/namespaces/{name}/pods")
        for pod in (pods.body.get("items", []) if pods.ok else []):
            kube.delete(f"/api/v1/namespaces/{name}/pods/{pod['metadata']['name']}", grace_seconds=0)
        kube.delete(f"/api/v1/namespaces/{name}")


class NodeFactory:
    """Node objects with unique names (nodes are cluster-scoped and shared by everyone on the apiserver)."""

    def __init__(self, kube: KubeHttp) -> None:
        self.kube = kube
        self.created: list[str] = []

    def make(self, prefix: str = "node", *, labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, allocatable: dict[str, str] | None = None) -> dict[str, Any]:
        name = f"hookserver-e2e-{prefix}-{suffix()}"
        body: dict[str, Any] = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "status": {"capacity": allocatable or {"cpu": "8", "memory": "16Gi", "pods": "110"},
                       "allocatable": allocatable or {"cpu": "8", "memory": "16Gi", "pods": "110"}},
        }
        node = self.kube.must(self.kube.post("/api/v1/nodes", body), f"create node {name}")
        self.created.append(name)
        return dict(node)

    def cleanup(self) -> None:
        for name in self.created:
            self.kube.delete(f"/api/v1/nodes/{name}")
            for plural in ("nodeslos", "nodemetrics"):
                self.kube.delete(f"{SLO_API}/{plural}/{name}")


@pytest.fixture
def kube_nodes(kube: KubeHttp) -> Iterator[NodeFactory]:
    factory = NodeFactory(kube)
    try:
        yield factory
    finally:
        factory.cleanup()


def _needs_update(existing: dict[str, Any], wanted: dict[str, Any]) -> bool:
    have = {v["name"]: v for v in existing["spec"].get("versions", [])}
    for version in wanted["spec"]["versions"]:
        got = have.get(version["name"])
        if got is None or not got.get("served") or got.get("subresources") != version.get("subresources"):
            return True
    return False


@pytest.fixture(scope="session")
def slo_crds(kube: KubeHttp) -> None:
    """NodeSLO and NodeMetric CRDs, created when missing; an existing CRD without what the tests need
    (served v1alpha1, the status subresource) gets ours, which is a superset (open schema)."""
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for path in sorted(CRD_DIR.glob("*.yaml")):
        wanted = yaml.safe_load(path.read_text())
        name = wanted["metadata"]["name"]
        existing = kube.get(f"{base}/{name}")
        if existing.status == 404:
            kube.must(kube.post(base, wanted), f"create CRD {name}")
        elif existing.ok and _needs_update(existing.body, wanted):
            wanted["metadata"]["resourceVersion"] = existing.body["metadata"]["resourceVersion"]
            kube.must(kube.put(f"{base}/{name}", wanted), f"update CRD {name}")
        elif not existing.ok:
            pytest.fail(f"GET CRD {name}: HTTP {existing.status}: {existing.reason()}")
        deadline = time.monotonic() + 30
        while True:
            crd = kube.must(kube.get(f"{base}/{name}"), f"get CRD {name}")
            # a CRD just created on a fresh apiserver may answer "conditions": null until it is established
            conditions = {c["type"]: c["status"] for c in (crd.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True":
                break
            if time.monotonic() > deadline:
                pytest.fail(f"CRD {name} not Established after 30 s: {conditions}")
            time.sleep(0.1)
    # Discovery of a new group can lag the Established condition by a moment, and each resource of the group
    # by its own moment (a fresh etcd served nodemetrics while nodeslos still answered 404): wait for every one.
    deadline = time.monotonic() + 30
    for plural in ("nodemetrics", "nodeslos"):
        while not kube.get(f"{SLO_API}/{plural}").ok:
            if time.monotonic() > deadline:
                pytest.fail(f"{plural} are not served 30 s after the CRDs were established")
            time.sleep(0.1)


def pod_body(name: str, node: str, *, qos: str = "", labels: dict[str, str] | None = None,
             annotations: dict[str, str] | None = None, cpu: str = "100m", memory: str = "64Mi") -> dict[str, Any]:
    """A pod bound to `node` (no scheduler runs); it stays Pending, which the informer does not mind."""
    all_labels = dict(labels or {})
    if qos:
        all_labels["koordinator.sh/qosClass"] = qos
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": all_labels, "annotations": annotations or {}},
        "spec": {
            "nodeName": node,
            "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": {"cpu": cpu, "memory": memory},
                                          "limits": {"cpu": cpu, "memory": memory}}}],
        },
    }


@pytest.fixture
def proxy(kube: KubeHttp) -> Iterator[CuttableProxy]:
    """A TCP proxy in front of the apiserver that a test can cut (RST), freeze (black hole) and restore."""
    url = urllib.parse.urlparse(kube.server)
    proxy = CuttableProxy(url.hostname or "127.0.0.1", url.port or 443)
    try:
        yield proxy
    finally:
        proxy.close()
