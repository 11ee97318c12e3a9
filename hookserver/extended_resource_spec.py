"""The `node.koordinator.sh/extended-resource-spec` annotation, parsed and validated.

koord-manager's webhook writes `{"containers": {"<name>": {"requests": {...}, "limits": {...}}}}` with Go
quantity strings. A key that is missing reads as -1 (absent), exactly as koordlet's getters do.
Anything malformed raises AnnotationError/QuantityError naming the JSON path, so a bad pod gets a clear
message instead of silently wrong cgroup values.

A shared leaf (outside the layers, like `koord_resources`): the batch hook reads it strictly (a bad annotation
is the decision's error), and the store reads the same parse leniently for a spec-less pod's requests
(`store.annotated_specs`, `batch_quantities`), so the two never disagree on what the annotation says.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
import dataclasses
from dataclasses import dataclass
from types import MappingProxyType

from hookserver.errors import AnnotationError
from hookserver.fastinit import fast_frozen_init
from hookserver.koord_resources import ANNOTATION_EXTENDED_RESOURCE_SPEC, BATCH_CPU, BATCH_MEMORY, LEGACY_BATCH_NAMES
from hookserver.quantity import resource_amount

__all__ = [
    "ANNOTATION_EXTENDED_RESOURCE_SPEC",
    "BATCH_CPU",
    "BATCH_MEMORY",
    "ContainerBatchResources",
    "batch_quantities",
    "parse_extended_resource_spec",
    "parse_spec_text",
]

_MAX_ANNOTATION_BYTES = 256 * 1024
# One encoder for `raw`: `json.dumps` with options builds a new encoder per call, which cost half the parse.
_RAW = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
# The C scanner `json.loads` ends in, called directly: the two whitespace regex matches and three Python calls
# around it were a third of a spec's decode, and a cold Synchronize decodes one spec a pod.
_SCAN: Callable[[str, int], tuple[object, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_NO_SPEC: Mapping[str, object] = MappingProxyType({})


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ContainerBatchResources:
    """One container's batch resources; -1 means the key was absent. CPU in milli-cores, memory in bytes.

    `has_limits` is False when the container entry had no `limits` object at all. `spec` is the entry as
    decoded (never mutated), kept for `raw`, its canonical JSON, which only an audit reader needs: encoding
    it for every container at parse time was a third of a cold parse (a node's Synchronize parses every
    pod's spec before it can answer).
    """

    name: str
    cpu_request_milli: int = -1
    cpu_limit_milli: int = -1
    memory_request_bytes: int = -1
    memory_limit_bytes: int = -1
    has_limits: bool = False
    spec: Mapping[str, object] = dataclasses.field(default_factory=lambda: _NO_SPEC, compare=False, repr=False)

    @property
    def raw(self) -> str:
        """The entry as compact JSON with sorted keys (what the audit shows as the decision's input)."""
        text: str = _RAW.encode(self.spec)
        return text


def parse_extended_resource_spec(annotations: Mapping[str, str]) -> dict[str, ContainerBatchResources] | None:
    """The per-container batch resources, or None when the pod has no annotation at all."""
    text = annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if text is None:
        return None
    return parse_spec_text(text)


def parse_spec_text(text: str) -> dict[str, ContainerBatchResources]:
    """Parse the annotation's text; raises AnnotationError/QuantityError naming the JSON path."""
    field = f"annotations[{ANNOTATION_EXTENDED_RESOURCE_SPEC}]"
    if len(text) > _MAX_ANNOTATION_BYTES:
        raise AnnotationError(f"annotation is {len(text)} bytes, over {_MAX_ANNOTATION_BYTES}", field=field)
    try:
        doc = _json_value(text)
    except ValueError as exc:
        raise AnnotationError(f"not valid JSON: {exc}", field=field) from None
    if not isinstance(doc, dict):
        raise AnnotationError(f"expected a JSON object, got {type(doc).__name__}", field=field)
    containers = doc.get("containers", {})
    if containers is None:
        containers = {}
    if not isinstance(containers, dict):
        raise AnnotationError("'containers' must be an object", field=f"{field}.containers")
    result: dict[str, ContainerBatchResources] = {}
    for name, spec in containers.items():
        # Error paths are spelled out only when there is an error (`_path`): eight f-strings a container,
        # built on every parse for nothing, cost as much as the JSON decode.
        if spec is None:
            spec = {}
        if not isinstance(spec, dict):
            raise AnnotationError("must be an object with 'requests' and 'limits'", field=_path(field, name))
        requests = _resource_list(spec.get("requests"), field, name, "requests")
        limits_raw = spec.get("limits")
        limits = _resource_list(limits_raw, field, name, "limits")
        result[str(name)] = ContainerBatchResources(
            str(name),
            _amount(requests, BATCH_CPU, field, name, "requests"),
            _amount(limits, BATCH_CPU, field, name, "limits"),
            _amount(requests, BATCH_MEMORY, field, name, "requests"),
            _amount(limits, BATCH_MEMORY, field, name, "limits"),
            limits_raw is not None,
            spec,
        )
    return result


def _json_value(text: str) -> object:
    """`json.loads(text)`: the scanner alone when the text is one value and nothing else, as the webhook writes
    it; anything else (whitespace around it, extra data, an error) goes through `json.loads` for its exact
    result or error."""
    try:
        doc, end = _SCAN(text, 0)
    except (StopIteration, ValueError):
        return json.loads(text)
    return doc if end == len(text) else json.loads(text)


def _path(field: str, container: object, part: str = "") -> str:
    """The JSON path an error names: `annotations[...].containers[<name>]`, then `.requests` or `.limits`."""
    path = f"{field}.containers[{container}]"
    return f"{path}.{part}" if part else path


def _resource_list(value: object, field: str, container: object, part: str) -> Mapping[str, object]:
    if value is None:
        return _NO_SPEC
    if not isinstance(value, dict):
        raise AnnotationError("must be an object of resource name to quantity", field=_path(field, container, part))
    return value


def _named(resources: Mapping[str, object], name: str) -> tuple[str, object] | None:
    """The key that gives resource `name` (the current name, else its legacy one) and its raw value; None when
    absent. The current name is looked up once (the common case), the legacy one only when it is absent."""
    raw = resources.get(name)
    if raw is None and name not in resources:
        key = LEGACY_BATCH_NAMES[name]
        if key not in resources:
            return None
        return key, resources[key]
    return name, raw


def batch_quantities(entry: ContainerBatchResources) -> tuple[dict[str, str], dict[str, str]]:
    """(requests, limits) of a parsed entry as quantity texts under the current batch names, the texts as the
    webhook wrote them (`1Gi` stays `1Gi`): how a pod spec would hold them. The entry was checked by the parse."""
    out: list[dict[str, str]] = []
    for part in ("requests", "limits"):
        resources = entry.spec.get(part)
        texts: dict[str, str] = {}
        if isinstance(resources, dict):
            for name in (BATCH_CPU, BATCH_MEMORY):
                found = _named(resources, name)
                if found is not None:
                    texts[name] = resource_amount(found[1], field=found[0]).text
        out.append(texts)
    return out[0], out[1]


def _amount(resources: Mapping[str, object], name: str, field: str, container: object, part: str) -> int:
    """Quantity.Value() of the resource (batch-cpu is already milli-cores); -1 when absent."""
    found = _named(resources, name)
    if found is None:
        return -1
    key, raw = found
    if isinstance(raw, str):
        known = _AMOUNTS.get(raw)  # a quantity seen before
        if known is not None:
            return known
    value = _checked_amount(raw, f"{_path(field, container, part)}[{key}]")
    if isinstance(raw, str):
        if len(_AMOUNTS) >= _AMOUNTS_MAX:
            _AMOUNTS.clear()
        _AMOUNTS[raw] = value
    return value


# Quantity text -> its checked value. Every pod of a node repeats a few quantities, and the exact parse with
# its checks is what a cold Synchronize spent most of its hook time on; only valid values are kept, so an
# error is always raised (and names its field) afresh.
_AMOUNTS: dict[str, int] = {}
_AMOUNTS_MAX = 4096


def _checked_amount(raw: object, field: str) -> int:
    return resource_amount(raw, field=field).value()
