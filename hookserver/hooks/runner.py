"""Run one stage's hooks over a request and the node view.

Hooks are pure: this module does no I/O and never raises for a plugin's error. Each plugin's error
becomes a failed `HookOutcome`; with `stop_on_error` (the Fail policy) the chain stops there. With
`breakers`, each hook run is timed against its budget, and a hook whose breaker is open is skipped: its
outcome is a not-applied result whose reason says why (see `hookserver.hooks.breaker`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

from hookserver.errors import HookTimeout, InputError
from hookserver.hooks.breaker import HookBreakers
from hookserver.hooks.context import ContainerRequest, PodRequest, Resources
from hookserver.hooks.outcome import (
    NO_RESOURCES,
    ContainerDevice,
    ContainerMount,
    HookOutcome,
    HookResult,
    StageOutcome,
)
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage
from hookserver.view import NodeView

__all__ = ["run_stage"]

_NOTHING = Resources()
_NO_ENVS: MappingProxyType[str, str] = MappingProxyType({})


def run_stage(
    registry: HookRegistry,
    stage: Stage,
    request: PodRequest | ContainerRequest,
    view: NodeView,
    *,
    stop_on_error: bool = False,
    clock: Callable[[], float] = time.perf_counter,
    breakers: HookBreakers | None = None,
) -> StageOutcome:
    started = clock()
    outcomes: list[HookOutcome] = []
    merged: Resources | None = None
    envs: Mapping[str, str] = _NO_ENVS  # the one contributor's own (read-only) map as is, so it keeps its identity
    envs_merged: dict[str, str] | None = None  # once a second hook adds envs
    mounts: tuple[ContainerMount, ...] = ()
    devices: tuple[ContainerDevice, ...] = ()
    errors = 0
    hook_running = ""  # read by `hookserver.hooks.deadline` to interrupt only a hook, never the runner
    for name, handler in registry.handlers(stage):
        if breakers is not None:
            skipped = breakers.admit(name, stage)
            if skipped:
                outcomes.append(HookOutcome(plugin=name, stage=stage, duration_s=0.0, result=_breaker_skip(skipped)))
                continue
        t0 = clock()
        try:
            hook_running = name
            result = handler(request, view)
            hook_running = ""
            if not isinstance(result, HookResult):
                raise TypeError(f"hook {name} returned {type(result).__name__}, not HookResult")
        except Exception as exc:  # noqa: BLE001 - a plugin's failure becomes a value, see module doc
            hook_running = ""
            took = clock() - t0
            if breakers is not None:
                if isinstance(exc, HookTimeout):
                    breakers.trip(name, stage, f"interrupted after {took * 1000:.0f} ms: past the call's deadline")
                else:
                    breakers.record(name, stage, took)
            errors += 1
            outcomes.append(
                HookOutcome(
                    plugin=name,
                    stage=stage,
                    duration_s=took,
                    error=str(exc) or type(exc).__name__,
                    error_type=type(exc).__name__,
                    error_field=exc.field if isinstance(exc, InputError) else getattr(exc, "field", ""),
                )
            )
            if stop_on_error:
                break
            continue
        took = clock() - t0
        if breakers is not None:
            breakers.record(name, stage, took)
        outcomes.append(HookOutcome(name, stage, took, result))  # positional: the hot path's cheapest call
        if result.applied:
            # The first applying hook's value is taken as is (results are frozen); later ones merge over it.
            # A result with no resources (the shared NO_RESOURCES) changes nothing: skipped by identity.
            res = result.resources
            if res is not NO_RESOURCES:
                merged = res if merged is None else res.merged_over(merged)
            if result.envs:
                if envs_merged is not None:
                    envs_merged.update(result.envs)
                elif not envs:
                    envs = result.envs if type(result.envs) is MappingProxyType else MappingProxyType(dict(result.envs))
                else:
                    envs_merged = {**envs, **result.envs}
            if result.mounts:
                mounts += result.mounts
            if result.devices:
                devices += result.devices
    return StageOutcome(  # (stage, outcomes, resources, envs, duration_s, error_count, mounts, devices), as above
        stage,
        tuple(outcomes),
        _NOTHING if merged is None else merged,
        envs if envs_merged is None else MappingProxyType(envs_merged),
        clock() - started,
        errors,
        mounts,
        devices,
    )


def _breaker_skip(reason: str) -> HookResult:
    return HookResult.skip(reason, breaker="open")
