"""`resourceUsedThresholdWithBE`: the thresholds behind BE CPU suppress and memory/CPU eviction.

Defaults are Koordinator's (`slo-controller-config` template; reference §7): off, suppress at 65 % with
the cpuset policy, evict memory at 70 %. Fields Koordinator leaves unset (nil) stay None here; the QoS
plugin that reads them applies its own fallback (e.g. memory lower = threshold − 2), via the helpers.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from hookserver.slo._base import SLOModel

__all__ = ["CPUEvictPolicy", "CPUSuppressPolicy", "ResourceThresholdStrategy"]

CPUSuppressPolicy = Literal["cpuset", "cfsQuota"]
CPUEvictPolicy = Literal["evictByRealLimit", "evictByAllocatable"]
# koordinator types both policies as plain strings without a `validate:` tag, so any string is accepted; koordlet
# acts on cfsQuota / evictByAllocatable and treats every other value as the default (cpuset / evictByRealLimit).



class ResourceThresholdStrategy(SLOModel):
    enable: bool = False
    cpu_suppress_threshold_percent: int = Field(default=65, ge=0, le=100, alias="cpuSuppressThresholdPercent")
    cpu_suppress_min_percent: int | None = Field(default=None, ge=0, le=100, alias="cpuSuppressMinPercent")
    cpu_suppress_policy: str = Field(default="cpuset", alias="cpuSuppressPolicy")
    memory_evict_threshold_percent: int = Field(default=70, ge=0, le=100, alias="memoryEvictThresholdPercent")
    memory_evict_lower_percent: int | None = Field(default=None, ge=0, le=100, alias="memoryEvictLowerPercent")
    cpu_evict_be_satisfaction_upper_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBESatisfactionUpperPercent"
    )
    cpu_evict_be_satisfaction_lower_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBESatisfactionLowerPercent"
    )
    cpu_evict_be_usage_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="cpuEvictBEUsageThresholdPercent"
    )
    cpu_evict_threshold_percent: int | None = Field(default=None, ge=0, le=100, alias="cpuEvictThresholdPercent")
    cpu_evict_lower_percent: int | None = Field(default=None, ge=0, le=100, alias="cpuEvictLowerPercent")
    cpu_evict_time_window_seconds: int | None = Field(default=None, ge=0, alias="cpuEvictTimeWindowSeconds")
    cpu_evict_policy: str = Field(default="evictByRealLimit", alias="cpuEvictPolicy")
    # koordinator v1.7 (CPUEvict, MemoryEvict) and v1.8 (CPU/MemoryAllocatableEvict). Koordinator gives them
    # no defaults: unset means the mode's config check fails and the mode is skipped with a reason. Ranges are
    # checked by the mode (qos.eviction.modes), not here, so one bad field skips one mode instead of rejecting the
    # whole NodeSLO (koordlet's own behaviour).
    evict_enabled_priority_threshold: int | None = Field(default=None, alias="evictEnabledPriorityThreshold")
    cpu_allocatable_evict_threshold_percent: int | None = Field(
        default=None, alias="cpuAllocatableEvictThresholdPercent"
    )
    cpu_allocatable_evict_lower_percent: int | None = Field(default=None, alias="cpuAllocatableEvictLowerPercent")
    memory_allocatable_evict_threshold_percent: int | None = Field(
        default=None, alias="memoryAllocatableEvictThresholdPercent"
    )
    memory_allocatable_evict_lower_percent: int | None = Field(
        default=None, alias="memoryAllocatableEvictLowerPercent"
    )
    allocatable_evict_priority_threshold: int | None = Field(default=None, alias="allocatableEvictPriorityThreshold")

    @model_validator(mode="after")
    def _ordered(self) -> ResourceThresholdStrategy:
        lower, upper = self.memory_evict_lower_percent, self.memory_evict_threshold_percent
        if lower is not None and lower > upper:
            raise ValueError(
                f"memoryEvictLowerPercent ({lower}) must not exceed memoryEvictThresholdPercent ({upper})"
            )
        s_low, s_up = self.cpu_evict_be_satisfaction_lower_percent, self.cpu_evict_be_satisfaction_upper_percent
        if s_low is not None and s_up is not None and s_low > s_up:
            raise ValueError(
                f"cpuEvictBESatisfactionLowerPercent ({s_low}) must not exceed "
                f"cpuEvictBESatisfactionUpperPercent ({s_up})"
            )
        return self

    def suppress_policy_in_effect(self) -> CPUSuppressPolicy | None:
        """The CPU suppress mechanism this NodeSLO asks for, or None when threshold strategies are off.

        The ONE rule both sides read: the batchresource hook leaves BE pod quotas unlimited while this is
        `cfsQuota` (the tier's quota does the suppressing), and the CPU suppress reconciler suppresses with
        this mechanism and restores the other."""
        if not self.enable:
            return None
        return "cfsQuota" if self.cpu_suppress_policy == "cfsQuota" else "cpuset"

    def effective_cpu_evict_lower_percent(self) -> int | None:
        """Koordinator's fallback for CPUEvict: threshold − 2 (None while the threshold is unset)."""
        if self.cpu_evict_lower_percent is not None:
            return self.cpu_evict_lower_percent
        if self.cpu_evict_threshold_percent is None:
            return None
        return self.cpu_evict_threshold_percent - 2

    def effective_memory_evict_lower_percent(self) -> int:
        """Koordinator's fallback when the lower bound is unset: threshold − 2."""
        if self.memory_evict_lower_percent is not None:
            return self.memory_evict_lower_percent
        return max(0, self.memory_evict_threshold_percent - 2)
