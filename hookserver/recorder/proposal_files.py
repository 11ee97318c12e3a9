"""`hookctl replay`'s proposal flags read into a `Proposal`: only the fields each names, each checked.

* `--slo FILE`: a NodeSLO, a bare spec, or an `slo-controller-config` ConfigMap (or its `data`); from a
  ConfigMap the replay takes each key's `clusterStrategy` (a recording has no node labels to pick a
  `nodeStrategies` entry by, and the report says so).
* `--colocation FILE`: the ConfigMap, its `data`, the `colocation-config` JSON, or a bare strategy.
* `--predictor KEY=VALUE`: `predictor.*` settings. `--gate NAME=BOOL`: feature gates.

A key no model knows is refused with the closest known name (`hookserver.koordlet_compat.gates.closest_gate`,
the one suggester `--feature-gates` uses too), where the agent would keep it silently (NodeSLO models keep
unknown keys for newer koordinator fields): in a what-if a misspelt threshold would quietly be no proposal.
Gates are checked as the agent's `--feature-gates` checks them (`parse_feature_gates`, `GateRegistry`).
Every error is one `InputError` naming the flag and the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from hookserver.errors import ConfigError, InputError
from hookserver.featuregates import FeatureGate, GateRegistry, parse_feature_gates
from hookserver.koordlet_compat.gates import closest_gate
from hookserver.predictor.settings import PredictorSettings
from hookserver.slo._base import canonical_json
from hookserver.slo.colocation import COLOCATION_KEY, ColocationStrategy, parse_colocation_config
from hookserver.slo.configmap import CONFIGMAP_KEYS, HOST_APPLICATION_KEY
from hookserver.slo.document import MAX_SLO_FILE_BYTES, parse_slo_document
from hookserver.slo.model import NodeSLOSpec
from hookserver.slo.validation import problems_of

from hookserver.recorder.proposal import Proposal

__all__ = ["colocation_overlay", "gate_overlay", "pairs", "predictor_overlay", "read_proposal", "slo_overlay"]


def pairs(items: Iterable[str], flag: str) -> dict[str, str]:
    """`KEY=VALUE` items; a key given twice keeps its last value (as the agent's flags)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InputError(f"expected KEY=VALUE, got {item!r}", field=flag)
        out[key.strip()] = value.strip()
    return out


def _read(path: str, flag: str) -> Any:
    """The file as YAML (JSON is YAML; a `.json` file is parsed as strict JSON)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_SLO_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}", field=flag) from None
    if len(raw) > MAX_SLO_FILE_BYTES:
        raise InputError(f"{path}: larger than {MAX_SLO_FILE_BYTES} bytes", field=flag)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text", field=flag) from None
    try:
        return json.loads(text) if Path(path).suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        what = "JSON" if Path(path).suffix == ".json" else "YAML or JSON"
        raise InputError(f"{path}: not valid {what}: {' '.join(str(exc).split())}", field=flag) from None


def _sub_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):  # `X | None`, `tuple[X, ...]`
        found = _sub_model(arg)
        if found is not None:
            return found
    return None


def unknown_fields(model: type[BaseModel], doc: Any, where: str) -> list[str]:
    """Every key of `doc` that `model` (recursively) does not have, with the closest known name. Keys match
    as koordinator's Go decoder matches them: exact, else case-insensitive."""
    if isinstance(doc, list):
        return [p for i, item in enumerate(doc) for p in unknown_fields(model, item, f"{where}[{i}]")]
    if not isinstance(doc, Mapping):
        return []
    wire = {(info.alias or name): info for name, info in model.model_fields.items()}
    folded = {key.lower(): key for key in wire}
    problems = []
    for key, value in doc.items():
        name = str(key)
        known = name if name in wire else folded.get(name.lower())
        path = f"{where}.{name}" if where else name
        if known is None:
            hint = closest_gate(name, list(wire))
            problems.append(f"unknown field {path}" + (f"; did you mean {hint}?" if hint else ""))
            continue
        sub = _sub_model(wire[known].annotation)
        if sub is not None:
            problems.extend(unknown_fields(sub, value, path))
    return problems


def _refuse(problems: list[str], path: str, flag: str) -> None:
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems), field=flag)


def _json_value(raw: Any, key: str, path: str, flag: str) -> Any:
    """A ConfigMap data value: a JSON string (koord-manager's form), or an object written as YAML."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        raise InputError(f"{path}: data.{key}: not valid JSON: {exc}", field=flag) from None


def slo_overlay(path: str) -> tuple[dict[str, Any], list[str]]:
    """The NodeSLO spec fields `path` names (wire names), and notes on what it held that is not applied."""
    flag = "--slo"
    doc = _read(path, flag)
    try:
        parsed = parse_slo_document(doc, origin=path)
    except ConfigError as exc:
        raise InputError(str(exc), field=flag) from None
    notes: list[str] = []
    if parsed.kind == "empty":
        raise InputError(f"{path}: empty; a proposal names at least one field", field=flag)
    if parsed.kind == "nodeslo":
        spec = doc.get("spec") if isinstance(doc.get("spec"), Mapping) else doc
        _refuse(unknown_fields(NodeSLOSpec, spec, ""), path, flag)
        return dict(canonical_json(NodeSLOSpec, spec)), notes
    data = doc["data"] if isinstance(doc.get("data"), Mapping) else doc
    overlay: dict[str, Any] = {}
    problems: list[str] = []
    keys = [*CONFIGMAP_KEYS, HOST_APPLICATION_KEY, COLOCATION_KEY]
    for key, raw in data.items():
        key = str(key)
        if key == COLOCATION_KEY:
            notes.append(f"{path}: {COLOCATION_KEY} is not applied by --slo (give it to --colocation)")
            continue
        if key not in CONFIGMAP_KEYS and key != HOST_APPLICATION_KEY:
            hint = closest_gate(key, keys)
            problems.append(f"unknown key data.{key}" + (f"; did you mean {hint}?" if hint else ""))
            continue
        value = _json_value(raw, key, path, flag) or {}
        if key == HOST_APPLICATION_KEY:
            overlay["hostApplications"] = value.get("applications") or []
            if value.get("nodeConfigs"):
                notes.append(f"{path}: {key}.nodeConfigs not applied (a recording has no node labels)")
            continue
        part, model = CONFIGMAP_KEYS[key]
        cluster = value.get("clusterStrategy") or {}
        problems += unknown_fields(model, cluster, f"data.{key}.clusterStrategy")
        overlay[part] = canonical_json(model, cluster)
        if value.get("nodeStrategies"):
            notes.append(f"{path}: {key}.nodeStrategies not applied (a recording has no node labels; "
                         "the replay takes clusterStrategy)")
    _refuse(problems, path, flag)
    return overlay, notes


def colocation_overlay(path: str) -> tuple[dict[str, Any], list[str]]:
    """The colocation strategy fields `path` names (wire names), and notes on what is not applied."""
    flag = "--colocation"
    doc = _read(path, flag)
    if isinstance(doc, Mapping) and isinstance(doc.get("data"), Mapping):
        doc = doc["data"]
    if isinstance(doc, Mapping) and COLOCATION_KEY in doc:
        doc = _json_value(doc[COLOCATION_KEY], COLOCATION_KEY, path, flag)
    if not isinstance(doc, Mapping) or not doc:
        raise InputError(f"{path}: expected a colocation-config object with at least one field", field=flag)
    problems: list[str] = []
    if parse_colocation_config(doc, origin=path, problems=problems) is None or problems:
        raise InputError(f"{path}: " + "; ".join(problems or ["invalid colocation-config"]), field=flag)
    body = {str(k): v for k, v in doc.items() if str(k).lower() != "nodeconfigs"}
    notes = ([f"{path}: nodeConfigs not applied (a recording has no node labels)"]
             if len(body) < len(doc) else [])
    _refuse(unknown_fields(ColocationStrategy, body, ""), path, flag)
    return dict(canonical_json(ColocationStrategy, body)), notes


def predictor_overlay(items: Iterable[str]) -> dict[str, Any]:
    """The `predictor.*` settings named, as the settings model types them."""
    flag = "--predictor"
    named = pairs(items, flag)
    problems = [f"unknown setting {key}" + (f"; did you mean {hint}?" if (hint := closest_gate(
        key, list(PredictorSettings.model_fields))) else "") for key in named if key not in PredictorSettings.model_fields]
    if problems:
        raise InputError("; ".join(problems), field=flag)
    try:
        settings = PredictorSettings.model_validate(named)
    except ValidationError as exc:
        raise InputError("; ".join(problems_of(exc, "predictor")), field=flag) from None
    return {key: getattr(settings, key) for key in named}


def gate_overlay(items: Iterable[str], gates: Iterable[FeatureGate]) -> dict[str, bool]:
    """Feature gates, checked as the agent's `--feature-gates`: values true/false (1/0, yes/no, on/off), names
    koordlet's (`gates` registered, the rest of koordlet's catalog accepted)."""
    flag = "--gate"
    try:
        values = parse_feature_gates(pairs(items, flag), origin=flag)
        GateRegistry(gates).resolve([(flag, values)])
    except ConfigError as exc:
        raise InputError(str(exc).removeprefix(f"{flag}: "), field=flag) from None
    return values


def read_proposal(*, slo: str | None, colocation: str | None, predictor: Iterable[str], gate: Iterable[str],
                  gates: Iterable[FeatureGate]) -> Proposal:
    """The proposal the flags describe (`None` / empty: nothing named)."""
    notes: list[str] = []
    origins: dict[str, str] = {}
    slo_fields: dict[str, Any] = {}
    colocation_fields: dict[str, Any] = {}
    if slo:
        slo_fields, more = slo_overlay(slo)
        notes += more
        origins["--slo"] = slo
    if colocation:
        colocation_fields, more = colocation_overlay(colocation)
        notes += more
        origins["--colocation"] = colocation
    return Proposal(slo=slo_fields, colocation=colocation_fields, predictor=predictor_overlay(predictor),
                    gates=gate_overlay(gate, gates), origins=origins, notes=tuple(notes))

