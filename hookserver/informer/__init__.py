"""Informer layer (beside hooks | qos | executor; only this package imports `kubernetes`): pods, the
node, NodeSLO, NodeMetric and the slo-controller-config ConfigMap from the apiserver, the kubelet or local
files, into the state store.

    informer = build_informer(settings, store=store, registry=registry)
    await informer.run(stop)      # never raises for outages: marks the store stale, reconnects
    informer.status()             # hookctl status: per source connected, last sync, rv, stale, counts
    informer.slo_report()         # hookctl slo: effective NodeSLO and where each part came from

Writers (server-side apply with our own field manager, never forced over another manager):
NodeCapacityWriter (batch/mid capacity into the Node's status), NodeMetricSpecWriter (this node's NodeMetric).

Only the settings are imported eagerly: `hookserver.config` needs them, and importing the kubernetes
client costs about a second, which `hookctl` should not pay. Everything else loads on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

from hookserver.informer.settings import InformerSettings, KubeletSettings

__all__ = [
    "ApiClientTransport",
    "CapacityDelivery",
    "Informer",
    "InformerMetrics",
    "InformerSettings",
    "KubeTransport",
    "KubeletPodSource",
    "KubeletSettings",
    "NodeCapacityWriter",
    "NodeHandler",
    "NodeMetricHandler",
    "NodeMetricSpecWriter",
    "NodeSLOHandler",
    "ObjectHandler",
    "PodHandler",
    "Reflector",
    "ResourceKind",
    "SLOConfigMapHandler",
    "SLOFileSource",
    "SLOState",
    "Source",
    "SpecDelivery",
    "WatchStream",
    "build_informer",
    "load_client_configuration",
    "resolve_mode",
]

_LAZY = {
    "ApiClientTransport": "transport",
    "KubeTransport": "transport",
    "WatchStream": "transport",
    "load_client_configuration": "transport",
    "Informer": "informer",
    "Source": "informer",
    "build_informer": "informer",
    "resolve_mode": "informer",
    "InformerMetrics": "metrics",
    "KubeletPodSource": "kubelet",
    "NodeHandler": "handlers",
    "NodeMetricHandler": "handlers",
    "NodeSLOHandler": "handlers",
    "ObjectHandler": "handlers",
    "PodHandler": "handlers",
    "Reflector": "reflector",
    "ResourceKind": "reflector",
    "SLOConfigMapHandler": "slo_configmap",
    "SLOFileSource": "slo_file",
    "SLOState": "slo_state",
    "CapacityDelivery": "node_capacity",
    "NodeCapacityWriter": "node_capacity",
    "NodeMetricSpecWriter": "nodemetric_spec",
    "SpecDelivery": "nodemetric_spec",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
