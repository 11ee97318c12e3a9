"""What a hook run produces: values, explanations and errors as values, never as exceptions.

Inside the pipeline an exception becomes a `HookOutcome`; the failure policy is applied once, at the
front door (`hookserver.dispatch`), never inside a plugin.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.fastinit import fast_frozen_init
from hookserver.hooks.context import Resources
from hookserver.hooks.stages import Stage

__all__ = [
    "NO_RESOURCES", "ContainerDevice", "ContainerMount", "FailurePolicy", "HookOutcome", "HookResult", "StageOutcome",
]

_EMPTY: Mapping[str, str] = MappingProxyType({})
# The one "no resources" value (frozen, so shared): a result that sets none is skipped by the runner's merge
# by identity, so the stage keeps the other hook's value object (and its memoized encoding) as is.
NO_RESOURCES = Resources()


class FailurePolicy(enum.Enum):
    """Ignore (default): an error returns the request unchanged. Fail: the caller gets an error."""

    IGNORE = "Ignore"
    FAIL = "Fail"


@dataclass(frozen=True, slots=True)
class ContainerMount:
    """A mount a hook adds to a new container (NRI `Mount`; koordlet's `protocol.Mount`). Only the NRI door
    can carry it: koord-runtime-proxy's container response has envs but no mounts."""

    destination: str
    source: str
    type: str = "bind"
    options: tuple[str, ...] = ("rbind",)
    # Non-empty: `source` is a host directory under this one that the door creates (mode 0777) before it
    # answers, because a bind mount of a missing source fails the container (HAMi-core's monitor cache dir).
    create_under: str = ""


@dataclass(frozen=True, slots=True)
class ContainerDevice:
    """A device node a hook adds to a new container (NRI `LinuxDevice`; koordlet's `protocol.LinuxDevice`):
    the path in the container, `c`/`b`, the host device numbers, and the file mode (koordlet: 0666)."""

    path: str
    major: int
    minor: int
    type: str = "c"
    file_mode: int | None = 0o666


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class HookResult:
    """What one plugin decided for one request.

    `applied` is False when the plugin looked and chose to do nothing (not a BE pod, no annotation);
    `reason` says why in words, and `inputs` holds the values the decision was computed from.
    `mounts` and `devices` are for a container being created (PreCreateContainer): the NRI door adds them
    to its adjustment; the proxy door cannot carry them (see `hookserver.hooks.plugins.gpu_env`).
    """

    resources: Resources = NO_RESOURCES
    envs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    applied: bool = True
    reason: str = ""
    inputs: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    mounts: tuple[ContainerMount, ...] = ()
    devices: tuple[ContainerDevice, ...] = ()

    @classmethod
    def skip(cls, reason: str, **inputs: str) -> HookResult:
        return cls(applied=False, reason=reason, inputs=MappingProxyType(dict(inputs)))


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class HookOutcome:
    """One plugin's run: its result or its error, and how long it took."""

    plugin: str
    stage: Stage
    duration_s: float
    result: HookResult | None = None
    error: str = ""
    error_type: str = ""
    error_field: str = ""

    @property
    def failed(self) -> bool:
        return self.result is None


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class StageOutcome:
    """Every plugin outcome for one stage, and the merged values (later plugins win per field)."""

    stage: Stage
    outcomes: tuple[HookOutcome, ...]
    resources: Resources
    envs: Mapping[str, str]
    duration_s: float
    error_count: int = -1  # set by the runner; -1: count on demand
    mounts: tuple[ContainerMount, ...] = ()  # every applying hook's, in run order
    devices: tuple[ContainerDevice, ...] = ()

    @property
    def errors(self) -> tuple[HookOutcome, ...]:
        return tuple(o for o in self.outcomes if o.failed)

    @property
    def failed(self) -> bool:
        if self.error_count >= 0:
            return self.error_count > 0
        return any(o.failed for o in self.outcomes)

    @property
    def first_error(self) -> HookOutcome | None:
        return next((o for o in self.outcomes if o.failed), None)
