"""A proposal: the fields an operator names, laid over the configuration the recording says was in force.

`hookctl replay --slo/--colocation/--predictor/--gate` change only what they name. Every other field stays as
recorded at each frame (the recording keeps the config in force, its changes included), so a `--slo` holding
one threshold moves that threshold and nothing else: koordinator's defaults never stand in for the
recording's values. The overlay is merged with koordinator's JSON merge (`hookserver.slo.merge`: objects key
by key, scalars and lists replaced), the way a node strategy is laid over the cluster's.

`describe(recording)` prints what a proposal changes as a diff against the recording
("resourceUsedThresholdWithBE.cpuSuppressThresholdPercent 80 -> 50"), so every report says what it ran.
Reading the flags' files is `proposal_files.py`; this module only holds and applies the overlay.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from pydantic import ValidationError

from hookserver.errors import InputError
from hookserver.slo.colocation import ColocationStrategy
from hookserver.slo.merge import merge_json
from hookserver.slo.model import NodeSLOSpec
from hookserver.slo.validation import problems_of

from qos.snapshot.model import QoSSnapshot

__all__ = ["FrameOverlay", "Proposal", "RecordedConfig", "leaves"]


class RecordedConfig(Protocol):
    """What `describe` reads of a recording: each config kind's values over time, and the predictor's."""

    def config_history(self, kind: str) -> list[tuple[float, Any]]: ...

    @property
    def predictor_settings(self) -> dict[str, Any]: ...


def leaves(doc: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every non-object value in `doc`; an empty object is a leaf of its own."""
    for key, value in doc.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and value:
            yield from leaves(value, path)
        else:
            yield path, value


def _at(doc: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(doc, Mapping) or key not in doc:
            return None
        doc = doc[key]
    return doc


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


@dataclass(frozen=True)
class Proposal:
    """The named fields of each flag (wire names), and the file each came from (for the report)."""

    slo: Mapping[str, Any] = field(default_factory=dict)  # NodeSLO spec fields
    colocation: Mapping[str, Any] = field(default_factory=dict)  # colocation strategy fields
    predictor: Mapping[str, Any] = field(default_factory=dict)  # predictor.* settings
    gates: Mapping[str, bool] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict)  # flag -> file
    notes: tuple[str, ...] = ()  # what a flag's file held that the replay does not apply, and why

    def is_empty(self) -> bool:
        return not (self.slo or self.colocation or self.predictor or self.gates)

    def names_memory_qos(self, gates: tuple[str, ...]) -> bool:
        """Whether the proposal can change what memory QoS gives a pod: a `memoryQOS` field of a class (or a whole
        class or strategy, which holds it), or one of memory QoS's `gates`."""
        for path, _value in leaves(self.slo):
            parts = path.split(".")
            if parts[0] == "resourceQOSStrategy" and (len(parts) < 3 or parts[2] == "memoryQOS"):
                return True
        return any(g in self.gates for g in gates)

    # -- applied per frame ---------------------------------------------------------------------------------
    def slo_over(self, recorded: NodeSLOSpec) -> NodeSLOSpec:
        """The recorded NodeSLO with this proposal's fields laid over it."""
        if not self.slo:
            return recorded
        merged = merge_json(recorded.model_dump(mode="json", by_alias=True, exclude_none=True), self.slo)
        try:
            return NodeSLOSpec.model_validate(merged)
        except ValidationError as exc:  # e.g. a proposed lower bound above the recorded threshold
            raise InputError(f"{self.origins.get('--slo', '')}: over the recorded NodeSLO: "
                             + "; ".join(problems_of(exc, "spec")), field="--slo") from None

    def colocation_over(self, recorded: Mapping[str, Any] | None) -> ColocationStrategy:
        """The recorded colocation strategy (koordinator's defaults if the recording has none) with this
        proposal's fields laid over it."""
        merged = merge_json(dict(recorded or {}), self.colocation)
        try:
            return ColocationStrategy.model_validate(merged)
        except ValidationError as exc:
            raise InputError(f"{self.origins.get('--colocation', '')}: over the recorded colocation-config: "
                             + "; ".join(problems_of(exc, "strategy")), field="--colocation") from None

    def check_against(self, recording: RecordedConfig) -> None:
        """Lay the overlay over every config the recording holds, before any replay: a field that does not fit
        one (a lower bound above the recorded threshold) is an InputError now, not in a worker process."""
        if self.slo:
            for _ts, body in recording.config_history("slo") or [(0.0, None)]:
                self.slo_over(NodeSLOSpec.model_validate((body or {}).get("spec", {})))
        if self.colocation:
            for _ts, body in recording.config_history("colocation") or [(0.0, None)]:
                self.colocation_over(body)

    # -- the report's header -------------------------------------------------------------------------------
    def describe(self, recording: RecordedConfig) -> list[str]:
        """One line per named field: `--slo resourceUsedThresholdWithBE.cpuSuppressThresholdPercent 80 -> 50`;
        a value the recording changed is given as each recorded value in turn; one already in force is
        `(as recorded)`. Nothing named: one line saying the proposal is the recording."""
        if self.is_empty():
            return ["none: every field as recorded (a null replay: proposed must equal recorded)"]
        lines: list[str] = []
        slo_history = [(body or {}).get("spec", {}) for _ts, body in recording.config_history("slo")]
        lines += self._diff("--slo", self.slo, slo_history or [{}])
        lines += self._diff("--colocation", self.colocation,
                            [body or {} for _ts, body in recording.config_history("colocation")] or [{}])
        lines += self._diff("--predictor", self.predictor, [recording.predictor_settings])
        gates = [body or {} for _ts, body in recording.config_history("gates")] or [{}]
        lines += self._diff("--gate", self.gates, gates)
        return lines + [f"note: {n}" for n in self.notes]

    def _diff(self, flag: str, overlay: Mapping[str, Any], history: list[Any]) -> list[str]:
        out = []
        origin = self.origins.get(flag)
        where = f" ({origin})" if origin else ""
        for path, value in leaves(overlay):
            seen: list[Any] = []
            for doc in history:
                old = _at(doc, path)
                if not seen or seen[-1] != old:
                    seen.append(old)
            before = ", then ".join(_show(v) for v in seen)
            change = "(as recorded)" if seen == [value] else f"{before} -> {_show(value)}"
            out.append(f"{flag}{where} {path} {change}")
        return out


class FrameOverlay:
    """The proposal laid over each frame's recorded config. The overlay is computed once per distinct recorded
    value (the reader decodes each config row once, so its identity marks the row): a day is 8,640 frames
    and a handful of config changes."""

    def __init__(self, proposal: Proposal, label: str) -> None:
        self.proposal = proposal
        self.label = label
        self._slo: dict[int, tuple[NodeSLOSpec, NodeSLOSpec]] = {}
        self._colocation: dict[int, tuple[Any, ColocationStrategy]] = {}

    def snapshot(self, snap: QoSSnapshot) -> QoSSnapshot:
        p = self.proposal
        if p.slo:
            cached = self._slo.get(id(snap.slo))
            if cached is None or cached[0] is not snap.slo:
                cached = (snap.slo, p.slo_over(snap.slo))
                self._slo[id(snap.slo)] = cached
            named = {str(part) for part in p.slo}
            sources = {part: (self.label if part in named else where) for part, where in snap.slo_sources.items()}
            snap = snap.with_slo(cached[1], origin=self.label, sources=sources)
        if p.gates:
            snap = replace(snap, feature_gates={**dict(snap.feature_gates or {}), **dict(p.gates)})
        return snap

    def strategy(self, recorded: Mapping[str, Any] | None) -> ColocationStrategy:
        cached = self._colocation.get(id(recorded))
        if cached is None or cached[0] is not recorded:
            cached = (recorded, self.proposal.colocation_over(recorded))
            self._colocation[id(recorded)] = cached
        return cached[1]
