"""Feature gates, set the way koordlet sets them: `--feature-gates=BEMemoryEvict=true,BECPUEvict=true`.

Each reconciler declares its gate (koordlet's name and default); the registry is built from the reconcilers
the daemon runs, so adding a reconciler adds its gate. Values come from, lowest first: the gate's default,
the config file's `feature_gates` map, `HOOKSERVER_FEATURE_GATES`, then the `--feature-gates` flag. Every
value remembers where it came from, for `hookctl qos`. A name no reconciler declared stops startup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from hookserver.errors import ConfigError

__all__ = ["FeatureGate", "GateRegistry", "GateValue", "GateValues", "parse_feature_gates"]

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True, slots=True)
class FeatureGate:
    """One gate: koordlet's name, its default there, and what it switches."""

    name: str
    default: bool
    description: str = ""


@dataclass(frozen=True, slots=True)
class GateValue:
    name: str
    enabled: bool
    source: str  # "default", "config file <path>", "environment HOOKSERVER_FEATURE_GATES", "flag --feature-gates"
    default: bool
    description: str = ""


def _bool(name: str, raw: Any, origin: str) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{origin}: feature gate {name}: expected true or false, got {raw!r}")


def parse_feature_gates(raw: Any, *, origin: str) -> dict[str, bool]:
    """`A=true,B=false` (koordlet's flag syntax) or a mapping `{A: true}`; None or "" is empty.

    Values are checked here (`A=maybe` is an error); names are checked by `GateRegistry.resolve`, which
    knows which gates exist."""
    if raw is None or raw == "":
        return {}
    out: dict[str, bool] = {}
    if isinstance(raw, Mapping):
        for key, value in raw.items():
            name = str(key).strip()
            if not name:
                raise ConfigError(f"{origin}: feature gate with an empty name")
            out[name] = _bool(name, value, origin)
        return out
    if not isinstance(raw, str):
        raise ConfigError(f"{origin}: feature gates must be 'Name=true,...' or a mapping, got {type(raw).__name__}")
    for part in raw.split(","):
        item = part.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(f"{origin}: feature gate {item!r}: expected Name=true or Name=false")
        out[name] = _bool(name, value, origin)
    return out


@dataclass(frozen=True, slots=True)
class GateValues:
    """The resolved gates: `enabled(name)` for code, `describe()` for `hookctl qos`."""

    values: Mapping[str, GateValue]

    def enabled(self, name: str) -> bool:
        value = self.values.get(name)
        if value is None:
            raise KeyError(f"unknown feature gate {name!r}")
        return value.enabled

    def describe(self) -> list[dict[str, Any]]:
        return [
            {"name": v.name, "enabled": v.enabled, "source": v.source, "default": v.default, "description": v.description}
            for v in sorted(self.values.values(), key=lambda v: v.name)
        ]


class GateRegistry:
    """The gates this agent knows. A gate may be registered by several reconcilers if they agree on it."""

    def __init__(self, gates: Iterable[FeatureGate] = ()) -> None:
        self._gates: dict[str, FeatureGate] = {}
        for gate in gates:
            self.register(gate)

    def register(self, gate: FeatureGate) -> None:
        known = self._gates.get(gate.name)
        if known is not None and known.default != gate.default:
            raise ConfigError(
                f"feature gate {gate.name} registered twice with different defaults ({known.default} and {gate.default})"
            )
        if known is None:
            self._gates[gate.name] = gate

    def names(self) -> list[str]:
        return sorted(self._gates)

    def get(self, name: str) -> FeatureGate | None:
        return self._gates.get(name)

    def resolve(self, layers: Iterable[tuple[str, Mapping[str, bool]]]) -> GateValues:
        """Apply `(source, {name: value})` layers, lowest first, over the defaults. Unknown names raise
        ConfigError naming the source and the gates this agent has."""
        values = {
            name: GateValue(name, gate.default, "default", gate.default, gate.description)
            for name, gate in self._gates.items()
        }
        for source, layer in layers:
            unknown = sorted(set(layer) - set(self._gates))
            if unknown:
                raise ConfigError(
                    f"{source}: unknown feature gate(s) {', '.join(unknown)} (known: {', '.join(self.names())})"
                )
            for name, enabled in layer.items():
                gate = self._gates[name]
                values[name] = GateValue(name, enabled, source, gate.default, gate.description)
        return GateValues(MappingProxyType(values))
