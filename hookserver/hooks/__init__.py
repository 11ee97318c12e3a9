"""Hooks layer: pure plugins over a request context and the typed node view (`hookserver.view`). No I/O here."""

from hookserver.hooks.breaker import BreakerSettings, BreakerState, HookBreakers
from hookserver.hooks.context import ContainerRequest, PodRequest, QoSClass, RequestSource, Resources
from hookserver.hooks.outcome import FailurePolicy, HookOutcome, HookResult, StageOutcome
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.runner import run_stage
from hookserver.hooks.stages import Stage

__all__ = [
    "BreakerSettings",
    "BreakerState",
    "HookBreakers",
    "ContainerRequest",
    "FailurePolicy",
    "HookOutcome",
    "HookRegistry",
    "HookResult",
    "PodRequest",
    "QoSClass",
    "RequestSource",
    "Resources",
    "Stage",
    "StageOutcome",
    "run_stage",
]
