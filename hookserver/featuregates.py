"""Feature gates, set the way koordlet sets them: `--feature-gates=BEMemoryEvict=true,BECPUEvict=true`.

Each reconciler declares its gate (koordlet's name and default), and so does a hook plugin that koordlet
gates; the registry is built from what the daemon runs, so adding a reconciler adds its gate. Values come
from, lowest first: the gate's default, the config file's `feature_gates` map, `HOOKSERVER_FEATURE_GATES`,
then the `--feature-gates` flag. Every value remembers where it came from, for `hookctl qos`.

The registry also holds koordlet's gate catalog (`hookserver.koordlet_compat.gates`): a koordlet gate that no
component registered is accepted with its value and marked not implemented (koordlet's DaemonSet arguments
start hookserver unchanged, and `hookctl qos` says what is not done). Only a name koordlet does not have
stops startup. "Implemented" is never a list kept here: it is whatever was registered.

`AllAlpha` and `AllBeta` work as in Kubernetes' featuregate package, which koordlet uses: `AllAlpha=true` turns on
every alpha gate that no layer sets by name, `AllAlpha=false` turns them off, likewise `AllBeta` for the beta
gates (so `AllBeta=false` switches off the beta gates that default to on). A gate named explicitly, in any
layer, keeps its own value, as Kubernetes applies the explicit setting whatever the map order. A gate's stage is
koordlet's (`koordlet_compat.gates`); a gate without one is switched by neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from hookserver.errors import ConfigError
from hookserver.koordlet_compat.gates import KOORDLET_GATES, closest_gate

__all__ = ["ALL_STAGE_KEYS", "FeatureGate", "GateRegistry", "GateValue", "GateValues", "koordlet_catalog", "parse_feature_gates"]

# Kubernetes' special keys, and the stage each one switches.
ALL_STAGE_KEYS: Mapping[str, str] = MappingProxyType({"AllAlpha": "alpha", "AllBeta": "beta"})
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True, slots=True)
class FeatureGate:
    """One gate: koordlet's name, its default there, and what it switches."""

    name: str
    default: bool
    description: str = ""
    stage: str = ""  # "alpha" / "beta" as koordlet declares it; "" takes the catalog's stage for the name


@dataclass(frozen=True, slots=True)
class GateValue:
    name: str
    enabled: bool
    source: str  # "default", "config file <path>", "environment HOOKSERVER_FEATURE_GATES", "flag --feature-gates"
    default: bool
    description: str = ""
    # False for a koordlet gate nothing here registered: its value is kept and shown, and switches nothing.
    implemented: bool = True


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
            {"name": v.name, "enabled": v.enabled, "source": v.source, "default": v.default,
             "description": v.description, "implemented": v.implemented}
            for v in sorted(self.values.values(), key=lambda v: v.name)
        ]

    def not_implemented(self) -> list[GateValue]:
        """koordlet gates accepted but not implemented, by name."""
        return sorted((v for v in self.values.values() if not v.implemented), key=lambda v: v.name)

    def not_implemented_line(self) -> str:
        """The one startup log line: `accepted, not implemented: Accelerators=true, ...`; the gates set away from
        their default first, since those are the ones an operator asked for and does not get."""
        gates = self.not_implemented()
        if not gates:
            return ""
        ordered = [v for v in gates if v.source != "default"] + [v for v in gates if v.source == "default"]
        return "accepted, not implemented: " + ", ".join(
            f"{v.name}={str(v.enabled).lower()}" + ("" if v.source == "default" else f" ({v.source})")
            for v in ordered
        )


def koordlet_catalog() -> tuple[FeatureGate, ...]:
    """koordlet's gates as FeatureGates (name, koordlet's default, what it switches there)."""
    return tuple(FeatureGate(g.name, g.default, g.description, g.stage) for g in KOORDLET_GATES)


class GateRegistry:
    """The gates this agent implements (registered), over a catalog of gates it accepts without implementing
    (koordlet's, by default). A gate may be registered by several components if they agree on its default."""

    def __init__(self, gates: Iterable[FeatureGate] = (), *, catalog: Iterable[FeatureGate] | None = None) -> None:
        self._gates: dict[str, FeatureGate] = {}
        self._catalog: dict[str, FeatureGate] = {g.name: g for g in (koordlet_catalog() if catalog is None else catalog)}
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
        """The implemented gates."""
        return sorted(self._gates)

    def accepted_names(self) -> list[str]:
        """Every name `resolve` accepts: the implemented gates, the catalog, AllAlpha and AllBeta."""
        return sorted(set(self._gates) | set(self._catalog) | set(ALL_STAGE_KEYS))

    def _stage(self, name: str) -> str:
        gate = self._gates.get(name)
        if gate is not None and gate.stage:
            return gate.stage
        listed = self._catalog.get(name)
        return listed.stage if listed is not None else ""

    def get(self, name: str) -> FeatureGate | None:
        return self._gates.get(name)

    def resolve(self, layers: Iterable[tuple[str, Mapping[str, bool]]]) -> GateValues:
        """Apply `(source, {name: value})` layers, lowest first, over the defaults. Registered gates are
        implemented; catalog gates nobody registered are kept, marked not implemented. A name in neither raises
        ConfigError naming the source, the closest known name, and every name accepted."""
        known: dict[str, tuple[FeatureGate, bool]] = {name: (gate, False) for name, gate in self._catalog.items()}
        known.update((name, (gate, True)) for name, gate in self._gates.items())
        values = {
            name: GateValue(name, gate.default, "default", gate.default, gate.description, implemented)
            for name, (gate, implemented) in known.items()
        }
        # AllAlpha / AllBeta are listed (hookctl qos) only when a layer sets them: they switch nothing themselves.
        switches: dict[str, GateValue] = {}
        explicit: set[str] = set()
        for source, layer in layers:
            unknown = sorted(set(layer) - set(known) - set(ALL_STAGE_KEYS))
            if unknown:
                hints = [f"{name} -> {hint}" for name in unknown
                         if (hint := closest_gate(name, [*known, *ALL_STAGE_KEYS]))]
                hint_text = f"; did you mean {', '.join(hints)}?" if hints else ""
                raise ConfigError(
                    f"{source}: unknown feature gate(s) {', '.join(unknown)}{hint_text} "
                    f"(known: {', '.join(sorted(known))})"
                )
            for name, enabled in layer.items():
                if name in ALL_STAGE_KEYS:
                    switches[name] = GateValue(name, enabled, source, False,
                                               f"sets every {ALL_STAGE_KEYS[name]} gate not set by name")
                    continue
                gate, implemented = known[name]
                values[name] = GateValue(name, enabled, source, gate.default, gate.description, implemented)
                explicit.add(name)
        for key, switch in switches.items():
            stage = ALL_STAGE_KEYS[key]
            for name in known:
                if name not in explicit and self._stage(name) == stage:
                    values[name] = replace(values[name], enabled=switch.enabled, source=f"{switch.source} {key}")
        return GateValues(MappingProxyType({**values, **switches}))
