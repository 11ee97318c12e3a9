"""Small recordings for the recorder and replay tests (the synthetic node, made small)."""

from __future__ import annotations

from typing import Any

from hookserver.recorder.scenarios.synthetic import generate

__all__ = ["EVICTING_SLO", "small_recording"]

# Memory on the small synthetic node starts near 74 %: at 70 % the agent itself evicts BE pods.
EVICTING_SLO: dict[str, Any] = {"resourceUsedThresholdWithBE": {
    "enable": True, "cpuSuppressThresholdPercent": 65, "memoryEvictThresholdPercent": 70}}


def small_recording(path: str, *, hours: float = 1.0, pods: int = 40, slo: dict[str, Any] | None = None,
                    start_hour: float = 0.0) -> str:
    generate(path, pods=pods, hours=hours, step_s=10.0, slo=slo, start_hour=start_hour)
    return path
