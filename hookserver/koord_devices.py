"""koord-scheduler's device allocation of a pod: the `scheduling.koordinator.sh/device-allocated` annotation.

koord-scheduler's DeviceShare plugin writes it at PreBind (koordinator `apis/extension/device_share.go`,
`DeviceAllocations`): a JSON object from device type (`gpu`, `rdma`, `fpga`, ...) to a list of allocations,
each `{"minor": int32, "resources": {name: quantity}, "id": "...", "extension": {"vfs": [{"minor", "busID"}]}}`.
Example: `{"gpu":[{"minor":1,"resources":{"koordinator.sh/gpu-core":50,"koordinator.sh/gpu-memory":"8Gi",
"koordinator.sh/gpu-memory-ratio":50}}]}`.

A shared helper outside the layers (like `koord_resources`): the GPU/RDMA injection hook reads it per
container, and the Device report and GPU capacity need the same names. Parsing follows Go's
`encoding/json` into those types, so what koordlet accepts is accepted and what it refuses is refused, each
refusal an `AnnotationError` that names the field (`gpu[1].resources[koordinator.sh/gpu-memory]`): an
annotation that is not a JSON object, a list where an object belongs, a minor that is not an int32, a
quantity that does not parse. Go's leniencies are kept where koordlet relies on them: `null` is an empty
allocation, a missing `minor` is 0, unknown keys are ignored. The order of each type's list is kept: it is
the order `NVIDIA_VISIBLE_DEVICES` lists the GPUs in.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hookserver.errors import AnnotationError, QuantityError
from hookserver.quantity import Quantity, parse_quantity

__all__ = [
    "ANNOTATION_DEVICE_ALLOCATED",
    "DEVICE_FPGA",
    "DEVICE_GPU",
    "DEVICE_RDMA",
    "GPU_CORE",
    "GPU_MEMORY",
    "GPU_MEMORY_RATIO",
    "LABEL_GPU_ISOLATION_PROVIDER",
    "GPU_ISOLATION_HAMI_CORE",
    "RDMA",
    "DeviceAllocation",
    "DeviceAllocations",
    "NodeGpu",
    "VirtualFunction",
    "cached_device_allocations",
    "device_allocations",
    "parse_device_allocations",
]

ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"
# apis/scheduling/v1alpha1/device_types.go: DeviceType values.
DEVICE_GPU = "gpu"
DEVICE_RDMA = "rdma"
DEVICE_FPGA = "fpga"
# apis/extension/device_share.go: resource names in an allocation (and in the Device object).
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
RDMA = "koordinator.sh/rdma"
# The pod label that asks for HAMi-core isolation, and its one value koordlet acts on.
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
GPU_ISOLATION_HAMI_CORE = "HAMi-core"

_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_MAX_TEXT = 1 << 20  # an allocation is a few hundred bytes; a megabyte is an attack or a bug
_NO_RESOURCES: Mapping[str, Quantity] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class VirtualFunction:
    """An SR-IOV virtual function koord-scheduler gave the pod (RDMA): `extension.vfs[]`."""

    minor: int
    bus_id: str


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """One allocated device: its minor (the GPU's `/dev/nvidiaN`), the resources taken from it, its id (the
    PCI address for RDMA, where the minor means nothing) and its virtual functions."""

    minor: int
    resources: Mapping[str, Quantity] = field(default_factory=lambda: _NO_RESOURCES)
    id: str = ""
    vfs: tuple[VirtualFunction, ...] = ()

    def value(self, resource: str) -> int | None:
        """Go's `Quantity.Value()` of one resource (rounded up), or None when the allocation lacks it."""
        q = self.resources.get(resource)
        return None if q is None else q.value()


DeviceAllocations = Mapping[str, tuple[DeviceAllocation, ...]]
_NONE: DeviceAllocations = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class NodeGpu:
    """One GPU of this node as the injection hook checks an allocation against it: the minor, its UUID and
    health (False after a fatal XID or when it stopped answering, with the reason). Filled from the GPU
    collector's inventory (`collectors.nvml.GpuDevice`) by whoever builds the hooks' view."""

    minor: int
    uuid: str = ""
    healthy: bool = True
    reason: str = ""


# Decoded annotations by text: every container of a pod (and often a whole workload) carries the same one, and
# both injection hooks read it. The values are immutable, so sharing is safe; errors are never kept.
_PARSED: dict[str, DeviceAllocations] = {}
_PARSED_MAX = 1024
_CACHED_TEXT = 16 * 1024


def cached_device_allocations(text: str) -> DeviceAllocations:
    """`parse_device_allocations(text)`, remembered by text (bounded; cleared whole when full)."""
    known = _PARSED.get(text)
    if known is not None:
        return known
    parsed = parse_device_allocations(text)
    if len(text) <= _CACHED_TEXT:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[text] = parsed
    return parsed


def device_allocations(annotations: Mapping[str, str]) -> DeviceAllocations | None:
    """The pod's allocation, or None when it has no annotation (koordlet: nothing to do). Raises
    `AnnotationError` for one that does not decode."""
    text = annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if text is None:
        return None
    return parse_device_allocations(text)


def parse_device_allocations(text: str) -> DeviceAllocations:
    """Decode the annotation's JSON; every refusal is an `AnnotationError` naming the field."""
    where = f"annotations[{ANNOTATION_DEVICE_ALLOCATED}]"
    if len(text) > _MAX_TEXT:
        raise AnnotationError(f"{len(text)} bytes, more than the {_MAX_TEXT} an allocation can need", field=where)
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise AnnotationError(f"not JSON: {exc}", field=where) from None
    if raw is None:
        return _NONE  # Go leaves the map empty
    if not isinstance(raw, dict):
        raise AnnotationError(f"expected an object of device type -> list, got {_kind(raw)}", field=where)
    out: dict[str, tuple[DeviceAllocation, ...]] = {}
    for device_type, entries in raw.items():
        if entries is None:
            out[device_type] = ()
            continue
        if not isinstance(entries, list):
            raise AnnotationError(f"expected a list of allocations, got {_kind(entries)}", field=device_type)
        out[device_type] = tuple(_allocation(e, f"{device_type}[{i}]") for i, e in enumerate(entries))
    return MappingProxyType(out)


def _allocation(raw: Any, where: str) -> DeviceAllocation:
    if not isinstance(raw, dict):
        # Go would decode null into a nil pointer that koordlet's hook then dereferences: refuse it here.
        raise AnnotationError(f"expected an allocation object, got {_kind(raw)}", field=where)
    minor = _int32(raw.get("minor"), f"{where}.minor")
    resources = _resources(raw.get("resources"), f"{where}.resources")
    ident = raw.get("id")
    if ident is None:
        ident = ""
    elif not isinstance(ident, str):
        raise AnnotationError(f"expected a string, got {_kind(ident)}", field=f"{where}.id")
    return DeviceAllocation(minor, resources, ident, _vfs(raw.get("extension"), f"{where}.extension"))


def _int32(raw: Any, where: str) -> int:
    if raw is None:
        return 0  # Go: a missing (or null) number is the zero value
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise AnnotationError(f"expected an integer, got {_kind(raw)}", field=where)
    if isinstance(raw, float) and not raw.is_integer():
        raise AnnotationError(f"expected an integer, got {raw!r}", field=where)
    number = int(raw)
    if not _INT32_MIN <= number <= _INT32_MAX:
        raise AnnotationError(f"{raw} is out of int32 range", field=where)
    return number


def _resources(raw: Any, where: str) -> Mapping[str, Quantity]:
    if raw is None:
        return _NO_RESOURCES
    if not isinstance(raw, dict):
        raise AnnotationError(f"expected an object of resource -> quantity, got {_kind(raw)}", field=where)
    out: dict[str, Quantity] = {}
    for name, value in raw.items():
        try:
            out[name] = parse_quantity(value, field=f"{where}[{name}]")
        except QuantityError as exc:
            raise AnnotationError(str(exc).removeprefix(f"{where}[{name}]: "), field=f"{where}[{name}]") from None
    return MappingProxyType(out)


def _vfs(raw: Any, where: str) -> tuple[VirtualFunction, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise AnnotationError(f"expected an object, got {_kind(raw)}", field=where)
    vfs = raw.get("vfs")
    if vfs is None:
        return ()
    if not isinstance(vfs, list):
        raise AnnotationError(f"expected a list, got {_kind(vfs)}", field=f"{where}.vfs")
    out: list[VirtualFunction] = []
    for i, vf in enumerate(vfs):
        at = f"{where}.vfs[{i}]"
        if not isinstance(vf, dict):
            raise AnnotationError(f"expected an object, got {_kind(vf)}", field=at)
        bus_id = vf.get("busID")
        if bus_id is None:
            bus_id = ""
        elif not isinstance(bus_id, str):
            raise AnnotationError(f"expected a string, got {_kind(bus_id)}", field=f"{at}.busID")
        # Go's VirtualFunction.Minor is an int (64-bit there); int32 is the range any device minor has.
        out.append(VirtualFunction(_int32(vf.get("minor"), f"{at}.minor"), bus_id))
    return tuple(out)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number",
            float: "a number"}.get(type(value), type(value).__name__)
