"""JSON merge with Koordinator's semantics: objects merge key by key, everything else is replaced.

Koordinator merges a node strategy over the cluster strategy (and a NodeSLO over the agent defaults)
by marshalling the override with `omitempty` and unmarshalling it onto a copy of the base. The effect:
nested objects merge recursively, lists and scalars replace, and unset (null) fields leave the base alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["merge_json"]


def merge_json(base: Mapping[str, Any], *overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A new dict: `base` with each override laid over it in turn. Inputs are never mutated."""
    merged: dict[str, Any] = _copy(base)
    for override in overrides:
        if override:
            merged = _merge_one(merged, override)
    return merged


def _merge_one(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in override.items():
        if value is None:
            continue
        current = base.get(key)
        if isinstance(value, Mapping) and isinstance(current, dict):
            base[key] = _merge_one(current, value)
        else:
            base[key] = _copy(value)
    return base


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy(v) for v in value]
    return value
