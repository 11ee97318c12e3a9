"""slo-controller-config ConfigMaps for the fake apiserver (its `configmaps` collection), kept out of
fake_apiserver.py so that module stays the wire fake alone."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["CM_NAME", "CM_NAMESPACE", "make_configmap", "slo_data"]

CM_NAMESPACE = "koordinator-system"
CM_NAME = "slo-controller-config"


def make_configmap(data: Mapping[str, str], *, name: str = CM_NAME, namespace: str = CM_NAMESPACE) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "uid": str(uuid.uuid4())}, "data": dict(data)}


def slo_data(*, colocation: Mapping[str, Any] | None = None, threshold: Mapping[str, Any] | None = None,
             raw: Mapping[str, str] | None = None) -> dict[str, str]:
    """ConfigMap `data`: colocation-config and a resource-threshold-config clusterStrategy as JSON strings,
    plus raw keys as given (e.g. a deliberately broken value)."""
    data: dict[str, str] = dict(raw or {})
    if colocation is not None:
        data["colocation-config"] = json.dumps(colocation)
    if threshold is not None:
        data["resource-threshold-config"] = json.dumps({"clusterStrategy": threshold})
    return data
