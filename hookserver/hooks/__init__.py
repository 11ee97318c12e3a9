"""Hooks layer: pure plugins over a request context and a store snapshot. No I/O here."""

from hookserver.hooks.context import ContainerRequest, PodRequest, QoSClass, RequestSource, Resources
from hookserver.hooks.outcome import FailurePolicy, HookOutcome, HookResult, StageOutcome
from hookserver.hooks.registry import HookRegistry
from hookserver.hooks.runner import run_stage
from hookserver.hooks.stages import Stage

__all__ = [
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
