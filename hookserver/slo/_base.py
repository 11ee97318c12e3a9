"""The base of every NodeSLO model: camelCase on the wire, snake_case in Python, Go-like key matching.

Koordinator writes NodeSLO with Go's encoding/json, which matches object keys case-insensitively when
it reads them. A ConfigMap that says `cpuQoS` therefore configures `cpuQOS` in the cluster, and we must
read it the same way, or a user's working file would silently do nothing here. Keys we do not know are
kept (extra="allow"), so a newer Koordinator field survives a round trip instead of failing validation.
A JSON null means "not set" (Go pointer fields), so it is dropped and the default applies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = ["SLOModel", "canonical_json"]

_KEY_INDEX: dict[type, dict[str, str]] = {}


def _key_index(cls: type[BaseModel]) -> dict[str, str]:
    index = _KEY_INDEX.get(cls)
    if index is None:
        folded: dict[str, str] = {}
        exact: dict[str, str] = {}
        for name, info in cls.model_fields.items():
            wire = info.alias or name
            folded[name.lower()] = wire
            folded[wire.lower()] = wire
            exact[name] = wire
            exact[wire] = wire
        index = {**folded, **exact}
        _KEY_INDEX[cls] = index
    return index


def _model_of(annotation: Any) -> type[SLOModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, SLOModel):
        return annotation
    for arg in get_args(annotation):  # `X | None`
        if isinstance(arg, type) and issubclass(arg, SLOModel):
            return arg
    return None


def canonical_json(cls: type[SLOModel], data: Any) -> Any:
    """Rename keys to their wire spelling, recursively, so two JSON documents merge key for key.

    Needed before merging a node strategy over a cluster strategy: `cpuQoS` in one and `cpuQOS` in the
    other must land on the same key, or the override would be lost.
    """
    if not isinstance(data, Mapping):
        return data
    index = _key_index(cls)
    out: dict[str, Any] = {}
    exact: set[str] = set()
    for key, value in data.items():
        skey = str(key)
        canonical = index.get(skey) or index.get(skey.lower(), skey)
        if canonical in exact:
            continue
        if index.get(skey) == canonical:
            exact.add(canonical)
        field = cls.model_fields.get(_wire_to_name(cls).get(canonical, ""))
        sub = _model_of(field.annotation) if field is not None else None
        out[canonical] = canonical_json(sub, value) if sub is not None else value
    return out


_WIRE_TO_NAME: dict[type, dict[str, str]] = {}


def _wire_to_name(cls: type[BaseModel]) -> dict[str, str]:
    table = _WIRE_TO_NAME.get(cls)
    if table is None:
        table = {(info.alias or name): name for name, info in cls.model_fields.items()}
        _WIRE_TO_NAME[cls] = table
    return table


class SLOModel(BaseModel):
    """Frozen, alias-aware, extra-keeping. Subclasses may override `_fill_defaults`."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)

    @classmethod
    def _fill_defaults(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Hook for models whose defaults depend on where they sit (per QoS class)."""
        return data

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        index = _key_index(cls)
        out: dict[str, Any] = {}
        exact: set[str] = set()
        for key, value in data.items():
            skey = str(key)
            if value is None:
                continue
            canonical = index.get(skey) or index.get(skey.lower(), skey)
            if canonical in exact:
                continue  # an exact spelling already set this field; a case-variant does not override it
            if skey == canonical or index.get(skey) == canonical:
                exact.add(canonical)
            out[canonical] = value
        return cls._fill_defaults(out)
