"""Run one stage's hooks over a request and a store snapshot.

Hooks are pure: this module does no I/O and never raises for a plugin's error. Each plugin's error
becomes a failed `HookOutcome`; with `stop_on_error` (the Fail policy) the chain stops there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from hookserver.errors import InputError
from hookserver.hooks.context import ContainerRequest, PodRequest, Resources
from hookserver.hooks.outcome import HookOutcome, HookResult, StageOutcome
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.stages import Stage

__all__ = ["run_stage"]

_NOTHING = Resources()
_NO_ENVS: MappingProxyType[str, str] = MappingProxyType({})


def run_stage(
    registry: HookRegistry,
    stage: Stage,
    request: PodRequest | ContainerRequest,
    snapshot: Any,
    *,
    stop_on_error: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> StageOutcome:
    started = clock()
    outcomes: list[HookOutcome] = []
    merged: Resources | None = None
    envs: dict[str, str] = {}
    for name, handler in registry.handlers(stage):
        t0 = clock()
        try:
            result = handler(request, snapshot)
            if not isinstance(result, HookResult):
                raise TypeError(f"hook {name} returned {type(result).__name__}, not HookResult")
        except Exception as exc:  # noqa: BLE001 - a plugin's failure becomes a value, see module doc
            outcomes.append(
                HookOutcome(
                    plugin=name,
                    stage=stage,
                    duration_s=clock() - t0,
                    error=str(exc) or type(exc).__name__,
                    error_type=type(exc).__name__,
                    error_field=exc.field if isinstance(exc, InputError) else getattr(exc, "field", ""),
                )
            )
            if stop_on_error:
                break
            continue
        outcomes.append(HookOutcome(plugin=name, stage=stage, duration_s=clock() - t0, result=result))
        if result.applied:
            # The first applying hook's value is taken as is (results are frozen); later ones merge over it.
            merged = result.resources if merged is None else result.resources.merged_over(merged)
            if result.envs:
                envs.update(result.envs)
    return StageOutcome(
        stage=stage,
        outcomes=tuple(outcomes),
        resources=_NOTHING if merged is None else merged,
        envs=MappingProxyType(envs) if envs else _NO_ENVS,
        duration_s=clock() - started,
    )
