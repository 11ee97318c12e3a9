"""What a dispatch answers a front door with, and what it leaves to be recorded after the reply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from hookserver.errors import HookServerError
from hookserver.executor.plan import ApplyReport
from hookserver.fastinit import fast_frozen_init
from hookserver.hooks.context import ContainerRequest
from hookserver.hooks.outcome import HookResult, StageOutcome
from hookserver.hooks.stages import Stage
from hookserver.resources import Resources
from hookserver.slo import HostApplicationSpec
from hookserver.store.state import StoreSnapshot

__all__ = ["Deferred", "DispatchResult", "HookRejected", "HostAppDecision"]


class HookRejected(HookServerError):
    """Under the Fail policy: the caller must fail the runtime operation. `field` names the input."""

    def __init__(self, message: str, *, field: str = "") -> None:
        super().__init__(message)
        self.field = field


@fast_frozen_init
@dataclass(frozen=True, slots=True)
class DispatchResult:
    """What the front door folds into its response. Empty resources mean "echo unchanged"."""

    stage: Stage
    resources: Resources = field(default_factory=Resources)
    envs: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    result: str = "ok"  # ok | skipped | error
    error: str = ""
    outcome: StageOutcome | None = None
    pod_writes: ApplyReport | None = None


@dataclass(frozen=True, slots=True)
class HostAppDecision:
    """One plugin's decision for one NodeSLO host application (`HookDispatcher.decide_host_apps`)."""

    app: HostApplicationSpec
    plugin: str
    result: HookResult


# A call `dispatch_container` answered but has not kept books for yet: (request as received, the call's
# snapshot, door, rpc, result, latency in seconds, whether the hooks ran (False: a memoized outcome)).
Deferred = tuple[ContainerRequest, StoreSnapshot, str, str, DispatchResult, float, bool]
