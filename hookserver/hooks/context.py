"""The one internal pod/container context that every front door builds.

The proxy gRPC server, the NRI plugin and the reconciler each translate their wire types into these
frozen values, so a hook plugin never sees protobuf and the same plugin serves all three doors.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.fastinit import fast_frozen_init
from hookserver.errors import UnknownQoSClassError
from hookserver.resources import Resources

__all__ = [
    "LABEL_QOS_CLASS",
    "LABEL_SKIP_HOOKSERVER",
    "ContainerRequest",
    "PodRequest",
    "QoSClass",
    "RequestSource",
    "Resources",
    "WireMap",
    "frozen_map",
    "wire_map",
]

LABEL_QOS_CLASS = "koordinator.sh/qosClass"
LABEL_SKIP_HOOKSERVER = "runtimeproxy.koordinator.sh/skip-hookserver"

_EMPTY: Mapping[str, str] = MappingProxyType({})


def frozen_map(values: Mapping[str, str] | None) -> Mapping[str, str]:
    """A read-only copy, so a context can be shared across threads without defensive copies."""
    if not values:
        return _EMPTY
    return MappingProxyType(dict(values))


class WireMap(Mapping[str, str]):
    """A decoded request's protobuf `map<string, string>`, read in place: the front doors' maps for one call.

    Hooks look up a key or two (the QoS label, the extended-resource annotation); copying every label,
    annotation and env map into a dict first cost more than the hooks themselves. Lookups go straight to the
    protobuf map (`get` and `in` in C); iterating copies it once. Read-only: the protobuf map's own
    `m[key]` *inserts* a missing key, so that is never called, and nothing here writes. The request
    message lives as long as a view of it does, so anything kept beyond the call (the store's pod record)
    takes a copy (`frozen_map`).
    """

    __slots__ = ("_copy", "_wire")

    def __init__(self, wire: Mapping[str, str]) -> None:
        self._wire = wire
        self._copy: dict[str, str] | None = None

    def __getitem__(self, key: str) -> str:
        value = self._wire.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        value = self._wire.get(key)
        return default if value is None else value

    def __contains__(self, key: object) -> bool:
        return key in self._wire

    def __len__(self) -> int:
        return len(self._wire)

    def __iter__(self) -> Iterator[str]:
        copied = self._copy
        if copied is None:
            wire = self._wire
            copied = self._copy = {key: wire.get(key, "") for key in wire}
        return iter(copied)

    def __repr__(self) -> str:
        return f"WireMap({dict(self.items())!r})"


def wire_map(wire: Mapping[str, str]) -> Mapping[str, str]:
    """`WireMap(wire)`, or the shared empty map when there is nothing in it."""
    return WireMap(wire) if wire else _EMPTY


class QoSClass(enum.Enum):
    """Koordinator QoS classes, from the `koordinator.sh/qosClass` label."""

    LSE = "LSE"
    LSR = "LSR"
    LS = "LS"
    BE = "BE"
    SYSTEM = "SYSTEM"
    NONE = ""

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> QoSClass:
        """The pod's class. A missing label is NONE; a value we do not know is an input error."""
        raw = labels.get(LABEL_QOS_CLASS)
        if raw is None or raw == "":
            return cls.NONE
        member = cls._value2member_map_.get(raw)  # `cls(raw)` costs ~1 µs on the hot path; this, a dict lookup
        if member is not None:
            return member  # type: ignore[return-value]
        try:
            return cls(raw)
        except ValueError:
            known = ", ".join(c.value for c in cls if c.value)
            raise UnknownQoSClassError(
                f"unknown QoS class {raw!r} (known: {known})", field=f"labels[{LABEL_QOS_CLASS}]"
            ) from None


class RequestSource(enum.Enum):
    """Which front door built the context."""

    PROXY = "proxy"
    NRI = "nri"
    RECONCILER = "reconciler"

    # As `Stage`: identity hashing is exact for singletons, and Enum's is a Python call.
    __hash__ = object.__hash__

    @property
    def wire(self) -> str:
        """= `value`, without Enum's descriptor (~0.3 us): every hook call files its container's source."""
        return _SOURCE_WIRE[self]


_SOURCE_WIRE = {source: source.value for source in RequestSource}


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class PodRequest:
    """A pod as a front door saw it."""

    namespace: str
    name: str
    uid: str
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    cgroup_parent: str = ""
    sandbox_id: str = ""
    runtime_handler: str = ""
    attempt: int = 0
    resources: Resources = field(default_factory=Resources)
    source: RequestSource = RequestSource.PROXY
    # The sandbox (pause) container's own cgroup as the runtime created it (NRI's `linux.cgroups_path`: a path,
    # or runc's systemd `slice:prefix:id`); "" where the door does not know it (the proxy, the reconciler).
    sandbox_cgroup: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def skips_hooks(self) -> bool:
        """The runtime-proxy skip label (PR #718): the agent's own pod must never wait on itself."""
        return self.labels.get(LABEL_SKIP_HOOKSERVER) == "true"


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class ContainerRequest:
    """A container as a front door saw it, with its pod.

    `container_id` is empty during PreCreateContainer on the proxy path: the runtime assigns it later.
    `cgroup_parent` is the pod cgroup parent (the container's own dir is derived by the executor).
    """

    pod: PodRequest
    name: str
    container_id: str = ""
    attempt: int = 0
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    envs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    resources: Resources = field(default_factory=Resources)
    cgroup_parent: str = ""
    source: RequestSource = RequestSource.PROXY
