"""Reading deploy/*.yaml and moving its objects into a test's namespace and names, so a shared apiserver
can take them without collisions: the same documents, only the namespace and cluster-scoped names differ."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.kube.kubehttp import KubeHttp

ROOT = Path(__file__).resolve().parents[2]
MANIFEST_NAMESPACE = "hookserver-system"
# The Role that grants the slo-controller-config ConfigMap lives in koordinator's namespace, which the
# manifest does not create (Koordinator's installation does) and a shared apiserver may not have.
KOORDINATOR_NAMESPACE = "koordinator-system"
CLUSTER_SCOPED_KINDS = {"ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "PriorityClass"}

__all__ = ["KOORDINATOR_NAMESPACE", "MANIFEST_NAMESPACE", "ROOT", "collection_path", "load", "manifests", "relocate"]


def manifests() -> list[Path]:
    return sorted((ROOT / "deploy").glob("hookserver*.yaml"))


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def relocate(doc: dict[str, Any], *, namespace: str, tag: str, koordinator_namespace: str = "") -> dict[str, Any]:
    """The manifest's namespace becomes `namespace`, koordinator's becomes `koordinator_namespace` (default:
    `namespace` too); cluster-scoped names (and the references to them) get `-<tag>`. A Namespace object gets
    a fresh name of its own, so its dry run has nothing to collide with."""
    out = copy.deepcopy(doc)
    meta = out.setdefault("metadata", {})
    kind = out.get("kind", "")
    if kind == "Namespace":
        meta["name"] = f"{meta['name']}-{tag}"
        return out
    if meta.get("namespace") == MANIFEST_NAMESPACE:
        meta["namespace"] = namespace
    elif meta.get("namespace") == KOORDINATOR_NAMESPACE:
        meta["namespace"] = koordinator_namespace or namespace
    if kind in CLUSTER_SCOPED_KINDS:
        meta["name"] = f"{meta['name']}-{tag}"
    if kind in ("ClusterRoleBinding", "RoleBinding"):
        if out["roleRef"]["kind"] == "ClusterRole":
            out["roleRef"]["name"] = f"{out['roleRef']['name']}-{tag}"
        for subject in out.get("subjects", []):
            if subject.get("namespace") == MANIFEST_NAMESPACE:
                subject["namespace"] = namespace
    return out


_discovery: dict[tuple[str, str], tuple[str, bool]] = {}


def collection_path(kube: KubeHttp, doc: dict[str, Any]) -> str:
    """The collection URL for the document's apiVersion and kind, found by discovery (as kubectl does)."""
    api_version, kind = doc["apiVersion"], doc["kind"]
    key = (api_version, kind)
    if key not in _discovery:
        prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        resources = kube.must(kube.get(prefix), f"discovery {prefix}")["resources"]
        for resource in resources:
            if "/" not in resource["name"]:
                _discovery[(api_version, resource["kind"])] = (f"{prefix}/{resource['name']}", resource["namespaced"])
        if key not in _discovery:
            raise AssertionError(f"the apiserver does not serve {kind} in {api_version}")
    base, namespaced = _discovery[key]
    if namespaced:
        prefix, plural = base.rsplit("/", 1)
        return f"{prefix}/namespaces/{doc['metadata']['namespace']}/{plural}"
    return base
