"""The `slo-controller-config` ConfigMap: a cluster strategy per key, plus node strategies by selector.

koord-manager turns this ConfigMap into one NodeSLO per node. A standalone agent reads the same file
and does that step for its own node, so a user can hand us exactly what they give the cluster.

Per key, the effective strategy for a node is: defaults < clusterStrategy < the FIRST nodeStrategies
entry whose (non-empty) nodeSelector matches the node's labels. Everything is validated when parsed,
node strategies included, so a typo fails at load time even on nodes it does not select.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from hookserver.slo._base import SLOModel, canonical_json
from hookserver.slo.colocation import COLOCATION_KEY, ColocationConfig, parse_colocation_config
from hookserver.slo.merge import merge_json
from hookserver.slo.model import PARTS, CPUBurstStrategy, HostApplicationSpec, NodeSLOSpec, SystemStrategy
from hookserver.slo.qos import ResourceQOSStrategy
from hookserver.slo.selector import LabelSelector
from hookserver.slo.threshold import ResourceThresholdStrategy
from hookserver.slo.validation import problems_of, raise_problems, validate_part

__all__ = [
    "CONFIGMAP_KEYS",
    "HOST_APPLICATION_KEY",
    "ResolvedSLO",
    "SLOConfigMap",
    "parse_slo_configmap",
]

log = logging.getLogger(__name__)

# ConfigMap data key -> (NodeSLO part in wire names, the model of that part).
CONFIGMAP_KEYS: Mapping[str, tuple[str, type[SLOModel]]] = MappingProxyType({
    "resource-threshold-config": ("resourceUsedThresholdWithBE", ResourceThresholdStrategy),
    "resource-qos-config": ("resourceQOSStrategy", ResourceQOSStrategy),
    "cpu-burst-config": ("cpuBurstStrategy", CPUBurstStrategy),
    "system-config": ("systemStrategy", SystemStrategy),
})
HOST_APPLICATION_KEY = "host-application-config"
_PROFILE_KEYS = ("name", "nodeSelector", "id")
_HOST_APPS = TypeAdapter(tuple[HostApplicationSpec, ...])


@dataclass(frozen=True, slots=True)
class ResolvedSLO:
    """The effective NodeSLO for one node and, per top-level part, where it came from."""

    spec: NodeSLOSpec
    sources: Mapping[str, str]


@dataclass(frozen=True, slots=True)
class _NodeStrategy:
    label: str  # "nodeStrategies[anolis]" or "nodeStrategies[2]"
    selector: LabelSelector
    value: Any  # the validated part (a model, or a tuple of host applications)


@dataclass(frozen=True, slots=True)
class _Part:
    key: str
    part: str
    cluster: Any
    nodes: tuple[_NodeStrategy, ...]

    def pick(self, labels: Mapping[str, str]) -> tuple[Any, str]:
        for node in self.nodes:
            if not node.selector.is_empty() and node.selector.matches(labels):
                return node.value, f"{self.key} {node.label}"
        return self.cluster, f"{self.key} clusterStrategy"


@dataclass(frozen=True, slots=True)
class SLOConfigMap:
    origin: str
    parts: Mapping[str, _Part]
    ignored: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # `colocation-config` (koord-manager's NodeMetric and batch/mid capacity settings); None when absent.
    colocation: ColocationConfig | None = None

    def resolve(self, node_labels: Mapping[str, str]) -> ResolvedSLO:
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        for part_name in PARTS:
            part = self.parts.get(part_name)
            if part is None:
                sources[part_name] = "default"
                continue
            value, where = part.pick(node_labels)
            values[part_name] = value
            sources[part_name] = f"{self.origin}: {where}"
        return ResolvedSLO(spec=NodeSLOSpec.model_validate(values), sources=MappingProxyType(sources))


def _decode(key: str, raw: Any, problems: list[str]) -> Mapping[str, Any] | None:
    """A data value is a JSON string (as koord-manager reads it); YAML objects are accepted too."""
    if isinstance(raw, Mapping):
        return raw
    if not isinstance(raw, str):
        problems.append(f"{key}: must be a JSON object string, got {type(raw).__name__}")
        return None
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except ValueError as json_exc:
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            problems.append(f"{key}: not valid JSON: {json_exc}")
            return None
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        problems.append(f"{key}: must be a JSON object, got {type(value).__name__}")
        return None
    return value


def _selector(raw: Any, where: str, problems: list[str]) -> LabelSelector | None:
    try:
        return LabelSelector.model_validate(raw or {})
    except ValidationError as exc:
        problems.extend(problems_of(exc, f"{where}.nodeSelector"))
        return None


def _profile(
    raw: Any, where: str, index: int, problems: list[str]
) -> tuple[str, LabelSelector | None, dict[str, Any]]:
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be an object, got {type(raw).__name__}")
        return "", None, {}
    body = {k: v for k, v in raw.items() if k not in _PROFILE_KEYS}
    name = raw.get("name")
    label = f"nodeStrategies[{name}]" if isinstance(name, str) and name else f"nodeStrategies[{index}]"
    return label, _selector(raw.get("nodeSelector"), where, problems), body


def _strategy_part(key: str, doc: Mapping[str, Any], problems: list[str]) -> _Part | None:
    part_name, model = CONFIGMAP_KEYS[key]
    before = len(problems)
    raw_cluster = doc.get("clusterStrategy") or {}
    if not isinstance(raw_cluster, Mapping):
        problems.append(f"{key}.clusterStrategy: must be an object, got {type(raw_cluster).__name__}")
        return None
    cluster_json = canonical_json(model, raw_cluster)
    cluster = validate_part(model, cluster_json, prefix=f"{key}.clusterStrategy", problems=problems)
    nodes: list[_NodeStrategy] = []
    raw_nodes = doc.get("nodeStrategies") or []
    if not isinstance(raw_nodes, list):
        problems.append(f"{key}.nodeStrategies: must be a list, got {type(raw_nodes).__name__}")
        raw_nodes = []
    for index, raw in enumerate(raw_nodes):
        where = f"{key}.nodeStrategies[{index}]"
        label, selector, body = _profile(raw, where, index, problems)
        merged = merge_json(cluster_json, canonical_json(model, body))
        value = validate_part(model, merged, prefix=where, problems=problems)
        if selector is not None and value is not None:
            nodes.append(_NodeStrategy(label=label, selector=selector, value=value))
    if len(problems) > before or cluster is None:
        return None
    return _Part(key=key, part=part_name, cluster=cluster, nodes=tuple(nodes))


def _apps(raw: Any, where: str, problems: list[str]) -> tuple[HostApplicationSpec, ...] | None:
    try:
        return _HOST_APPS.validate_python(raw or [])
    except ValidationError as exc:
        problems.extend(problems_of(exc, where))
        return None


def _host_apps_part(doc: Mapping[str, Any], problems: list[str]) -> _Part | None:
    """host-application-config: `applications`, and `nodeConfigs` whose list replaces it on a match."""
    key = HOST_APPLICATION_KEY
    before = len(problems)
    cluster = _apps(doc.get("applications"), f"{key}.applications", problems)
    nodes: list[_NodeStrategy] = []
    raw_nodes = doc.get("nodeConfigs") or []
    if not isinstance(raw_nodes, list):
        problems.append(f"{key}.nodeConfigs: must be a list, got {type(raw_nodes).__name__}")
        raw_nodes = []
    for index, raw in enumerate(raw_nodes):
        where = f"{key}.nodeConfigs[{index}]"
        label, selector, body = _profile(raw, where, index, problems)
        label = label.replace("nodeStrategies", "nodeConfigs")
        apps = _apps(body.get("applications"), f"{where}.applications", problems)
        if selector is not None and apps is not None:
            nodes.append(_NodeStrategy(label=label, selector=selector, value=apps))
    if len(problems) > before or cluster is None:
        return None
    return _Part(key=key, part="hostApplications", cluster=cluster, nodes=tuple(nodes))


def parse_slo_configmap(data: Mapping[str, Any], *, origin: str) -> SLOConfigMap:
    """Parse the ConfigMap's `data`. Raises ConfigError naming `origin` and every bad field's path."""
    problems: list[str] = []
    parts: dict[str, _Part] = {}
    ignored: dict[str, str] = {}
    colocation: ColocationConfig | None = None
    for key, raw in data.items():
        key = str(key)
        if key == COLOCATION_KEY:
            doc = _decode(key, raw, problems)
            if doc is not None:
                colocation = parse_colocation_config(doc, origin=origin, problems=problems)
        elif key in CONFIGMAP_KEYS or key == HOST_APPLICATION_KEY:
            doc = _decode(key, raw, problems)
            if doc is None:
                continue
            part = _strategy_part(key, doc, problems) if key in CONFIGMAP_KEYS else _host_apps_part(doc, problems)
            if part is not None:
                parts[part.part] = part
        else:
            log.info("%s: ignoring unknown ConfigMap key %r", origin, key)
            ignored[key] = "unknown key"
    raise_problems(origin, problems)
    return SLOConfigMap(origin=origin, parts=MappingProxyType(parts), ignored=MappingProxyType(ignored),
                        colocation=colocation)

