"""Any NodeSLO input a user or the apiserver gives us, turned into the effective NodeSLO for a node.

Accepted shapes (a `--slo-file` may hold any of them, as YAML or JSON):
  * a `slo-controller-config` ConfigMap (`kind: ConfigMap` with `data`), or just its `data` mapping;
  * a NodeSLO object (`kind: NodeSLO` with `spec`), as the apiserver serves it;
  * a bare NodeSLO spec (`resourceUsedThresholdWithBE: ...`).
A NodeSLO spec is laid over the agent defaults part by part, as koordlet does with the NodeSLO it
watches; a ConfigMap is resolved for the node's labels first (see configmap.py). Empty input means
defaults. Errors are ConfigError naming the origin (file path or object) and each field's path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml
from pydantic import ValidationError

from hookserver.errors import ConfigError
from hookserver.slo._base import canonical_json
from hookserver.slo.configmap import (
    CONFIGMAP_KEYS,
    HOST_APPLICATION_KEY,
    ResolvedSLO,
    SLOConfigMap,
    parse_slo_configmap,
)
from hookserver.slo.colocation import COLOCATION_KEY, ResolvedColocation, default_colocation
from hookserver.slo.model import PARTS, NodeSLOSpec
from hookserver.slo.validation import problems_of

__all__ = [
    "MAX_SLO_FILE_BYTES",
    "SLODocument",
    "default_slo",
    "parse_slo_document",
    "parse_slo_text",
    "read_slo_file",
    "spec_from_json",
]

# A NodeSLO is a few KiB; anything past this is not one, and reading it whole would only cost memory.
MAX_SLO_FILE_BYTES = 4 << 20


def default_slo(origin: str = "default") -> ResolvedSLO:
    """Koordinator's defaults, every part marked as coming from `origin`."""
    return ResolvedSLO(spec=NodeSLOSpec.model_validate({}), sources=MappingProxyType(dict.fromkeys(PARTS, origin)))


def spec_from_json(spec: Mapping[str, Any], *, origin: str) -> ResolvedSLO:
    """A NodeSLO spec over the defaults. Parts the spec sets come from `origin`, the rest from defaults."""
    canonical = canonical_json(NodeSLOSpec, spec)
    try:
        model = NodeSLOSpec.model_validate(canonical)
    except ValidationError as exc:
        raise ConfigError(f"{origin}: invalid NodeSLO: " + "; ".join(problems_of(exc, "spec"))) from None
    sources = {part: (origin if canonical.get(part) is not None else "default") for part in PARTS}
    return ResolvedSLO(spec=model, sources=MappingProxyType(sources))


@dataclass(frozen=True, slots=True)
class SLODocument:
    """A parsed input, not yet tied to a node. `resolve(labels)` gives the effective NodeSLO."""

    origin: str
    kind: str  # "configmap" | "nodeslo" | "empty"
    configmap: SLOConfigMap | None = None
    spec: ResolvedSLO | None = None

    def resolve(self, node_labels: Mapping[str, str]) -> ResolvedSLO:
        if self.configmap is not None:
            return self.configmap.resolve(node_labels)
        if self.spec is not None:
            return self.spec
        return default_slo()

    def colocation(
        self, node_labels: Mapping[str, str], node_annotations: Mapping[str, str] | None = None
    ) -> ResolvedColocation:
        """The node's effective `colocation-config` (defaults, colocation off, when the document has none:
        a NodeSLO object never carries it; koord-manager also takes a ConfigMap without the key as defaults)."""
        if self.configmap is not None and self.configmap.colocation is not None:
            return self.configmap.colocation.resolve(node_labels, node_annotations)
        return default_colocation(f"default ({self.origin} has no {COLOCATION_KEY})")

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"origin": self.origin, "kind": self.kind}
        if self.configmap is not None:
            out["ignored_keys"] = dict(self.configmap.ignored)
            out["colocation_config"] = self.configmap.colocation is not None
        return out


def _looks_like_configmap_data(doc: Mapping[str, Any]) -> bool:
    keys = set(map(str, doc))
    known = set(CONFIGMAP_KEYS) | {HOST_APPLICATION_KEY, COLOCATION_KEY}
    return bool(keys) and bool(keys & known) and all("-" in k for k in keys)


def parse_slo_document(doc: Any, *, origin: str) -> SLODocument:
    if doc is None or doc == {}:
        return SLODocument(origin=origin, kind="empty")
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{origin}: top level must be a mapping, got {type(doc).__name__}")
    kind = doc.get("kind")
    if kind == "ConfigMap" or (kind is None and isinstance(doc.get("data"), Mapping)):
        data = doc.get("data") or {}
        if not isinstance(data, Mapping):
            raise ConfigError(f"{origin}: data: must be a mapping, got {type(data).__name__}")
        return SLODocument(origin=origin, kind="configmap", configmap=parse_slo_configmap(data, origin=origin))
    if kind == "NodeSLO" or (kind is None and isinstance(doc.get("spec"), Mapping)):
        spec = doc.get("spec") or {}
        if not isinstance(spec, Mapping):
            raise ConfigError(f"{origin}: spec: must be a mapping, got {type(spec).__name__}")
        return SLODocument(origin=origin, kind="nodeslo", spec=spec_from_json(spec, origin=origin))
    if kind is not None:
        raise ConfigError(f"{origin}: kind: expected ConfigMap or NodeSLO, got {kind!r}")
    if _looks_like_configmap_data(doc):
        return SLODocument(origin=origin, kind="configmap", configmap=parse_slo_configmap(doc, origin=origin))
    return SLODocument(origin=origin, kind="nodeslo", spec=spec_from_json(doc, origin=origin))


def read_slo_file(path: str) -> SLODocument:
    """Read and parse a `--slo-file`. YAML or JSON (JSON is YAML; `.json` is parsed strictly)."""
    origin = f"file {path}"
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_SLO_FILE_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{origin}: {exc.strerror or exc}") from exc
    if len(raw) > MAX_SLO_FILE_BYTES:
        raise ConfigError(f"{origin}: larger than {MAX_SLO_FILE_BYTES} bytes; not a NodeSLO file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{origin}: not UTF-8 text: {exc}") from None
    return parse_slo_text(text, origin=origin, strict_json=Path(path).suffix == ".json")


def parse_slo_text(text: str, *, origin: str, strict_json: bool = False) -> SLODocument:
    """Parse a NodeSLO / ConfigMap document given as text (a file's content sent over the debug API)."""
    if len(text.encode("utf-8", "replace")) > MAX_SLO_FILE_BYTES:
        raise ConfigError(f"{origin}: larger than {MAX_SLO_FILE_BYTES} bytes; not a NodeSLO file")
    try:
        doc = json.loads(text) if strict_json else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        # One line (a log line, hookctl's error line): PyYAML's message spans several; line and column stay.
        raise ConfigError(f"{origin}: not valid {'JSON' if strict_json else 'YAML/JSON'}: {' '.join(str(exc).split())}") from None
    return parse_slo_document(doc, origin=origin)
