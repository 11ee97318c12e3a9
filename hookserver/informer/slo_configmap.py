"""koordinator's `slo-controller-config` ConfigMap, watched by name from the apiserver (cluster mode).

It holds the colocation-config (the capacity publisher's input) and the NodeSLO parts koord-manager renders
into every node's NodeSLO. Why a watch by name and not a mounted file: a ConfigMap volume must live in the
agent's own namespace (hookserver-system) while this one lives in koordinator-system, and a watch sees an
edit in seconds; RBAC grants exactly this one object (`resourceNames`), so the list and watch ask for it
with `metadata.name=<name>`.

The source must never hold the agent up: a 403 (the Role is not granted, e.g. an older manifest) or a 404
is an absent optional resource (defaults, healthy, first sync done) whose status says what to grant. A
deleted ConfigMap, or none, means the defaults; an invalid one keeps the previous one in force (SLOState).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from hookserver.errors import ConfigError, InputError
from hookserver.informer.handlers import OneObjectHandler
from hookserver.informer.reflector import ResourceKind
from hookserver.informer.slo_state import SLOState
from hookserver.slo import parse_slo_document

__all__ = ["SLOConfigMapHandler", "slo_configmap_kind"]

log = logging.getLogger(__name__)


def slo_configmap_kind(namespace: str, name: str) -> ResourceKind:
    """List and watch one ConfigMap: 403 and 404 are "not available", with what to grant in the status."""
    hint = (
        f"hookserver may not read ConfigMap {namespace}/{name}: grant its ServiceAccount get, list and watch on "
        f"configmaps with resourceNames [{name}] in namespace {namespace} (the Role and RoleBinding "
        f"hookserver-slo-config in deploy/hookserver.yaml); until then the colocation-config is koordinator's "
        "defaults (colocation off)"
    )
    return ResourceKind(
        "slo-configmap", f"/api/v1/namespaces/{namespace}/configmaps", f"metadata.name={name}",
        optional=True, tolerated=frozenset({403}), hint=hint,
    )


class SLOConfigMapHandler(OneObjectHandler):
    """The ConfigMap's `data` as an SLODocument into SLOState; DELETED, an empty list or an absent resource
    mean "no ConfigMap". Any other object the server sends (it should not) is ignored."""

    def __init__(self, slo: SLOState, *, namespace: str, name: str) -> None:
        super().__init__(name=name)
        self._slo = slo
        self._namespace = namespace
        self._origin = f"configmap {namespace}/{name}"
        self._input = f"apiserver {self._origin}"

    def _ours(self, obj: Any) -> bool:
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        return isinstance(meta, Mapping) and meta.get("name") == self._name and \
            meta.get("namespace", self._namespace) == self._namespace

    def _set(self, obj: Mapping[str, Any]) -> None:
        data = obj.get("data") or {}
        if not isinstance(data, Mapping):
            self._reject(f"{self._origin}: data: must be an object, got {type(data).__name__}", "data")
        try:
            document = parse_slo_document({"kind": "ConfigMap", "data": data}, origin=self._origin)
        except ConfigError as exc:
            self._reject(str(exc), "data")
        self._slo.set_configmap(document, input_name=self._input)

    def _reject(self, message: str, field: str) -> NoReturn:
        """Keep the previous ConfigMap in force, say why in `hookctl slo`, and let the reflector count it."""
        self._slo.set_configmap_error(message, input_name=self._input)
        raise InputError(message, field=field)

    def _clear(self) -> None:
        self._slo.set_configmap(None, input_name=f"apiserver: no {self._origin}")
