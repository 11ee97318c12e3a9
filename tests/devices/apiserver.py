"""An in-process apiserver for the device writers: server-side apply with real field ownership
(tests/informer/fake_ssa.py) on the Device object, the Node and its status subresource, a CRD that can be
missing (404), and applies by other managers standing in for koordlet or koord-manager. Ownership is kept per
request path, as kube-apiserver keeps managedFields per subresource since 1.22."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from tests.informer.fake_ssa import ApplyConflict, ManagedFields, apply_config, in_status, outside_status

DEVICES = "/apis/scheduling.koordinator.sh/v1alpha1/devices/"
NODES = "/api/v1/nodes/"


def _everything(path: tuple[str, ...]) -> bool:
    return bool(path) and path[0] not in ("apiVersion", "kind") and path[:2] != ("metadata", "name")


class SsaApiserver:
    def __init__(self, *, crd: bool = True) -> None:
        self.crd = crd
        self.objects: dict[str, dict[str, Any]] = {}
        self.tables: dict[str, ManagedFields] = {}
        self.calls: list[tuple[str, str, Any, dict[str, str]]] = []

    def add_node(self, name: str, labels: Mapping[str, str] | None = None) -> None:
        self.objects[NODES + name] = {"apiVersion": "v1", "kind": "Node",
                                      "metadata": {"name": name, "labels": dict(labels or {})},
                                      "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}

    def _target(self, path: str) -> tuple[str, Any]:
        if path.startswith(DEVICES):
            return path, _everything
        if path.startswith(NODES) and path.endswith("/status"):
            return path[: -len("/status")], in_status
        return path, outside_status

    def apply_as(self, manager: str, path: str, config: Mapping[str, Any]) -> None:
        status, body = self._apply(path, config, manager, force=True)
        assert status == 200, body

    def _apply(self, path: str, config: Mapping[str, Any], manager: str, *, force: bool) -> tuple[int, Any]:
        if path.startswith(DEVICES) and not self.crd:
            return 404, {"kind": "Status", "reason": "NotFound", "message": "the server could not find the requested resource"}
        key, scope = self._target(path)
        live = self.objects.get(key)
        if live is None and key.startswith(NODES):
            return 404, {"kind": "Status", "reason": "NotFound", "message": "nodes not found"}
        # managedFields entries are per subresource (kube >= 1.22): a status apply and a main-resource apply
        # by one manager are separate entries, neither drops what the other applied
        table = self.tables.setdefault(path, ManagedFields())
        try:
            merged = apply_config(live, config, table, manager=manager, force=force, scope=scope,
                                  api_version=str(config.get("apiVersion", "v1")))
        except ApplyConflict as exc:
            return 409, exc.status()
        merged.setdefault("apiVersion", config.get("apiVersion"))
        merged.setdefault("kind", config.get("kind"))
        merged.setdefault("metadata", {})["name"] = key.rsplit("/", 1)[1]
        self.objects[key] = merged
        return 200, copy.deepcopy(merged)

    def request_json(self, method: str, path: str, body: Any = None, *, timeout_s: float,
                     content_type: str = "application/json", params: Mapping[str, str] | None = None) -> tuple[int, Any]:
        self.calls.append((method, path, copy.deepcopy(body), dict(params or {})))
        assert method == "PATCH" and content_type == "application/apply-patch+yaml"
        query = dict(params or {})
        return self._apply(path, body, query["fieldManager"], force=query.get("force") == "true")

    def get(self, path: str) -> dict[str, Any] | None:
        return self.objects.get(path)
