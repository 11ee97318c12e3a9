"""The NodeSLO spec as Koordinator writes it (`slo.koordinator.sh/v1alpha1`), plus its smaller parts.

`NodeSLOSpec.model_validate({})` is the agent's default NodeSLO. Python code reads snake_case attributes
(`spec.resource_used_threshold_with_be.cpu_suppress_policy`); JSON in and out is camelCase
(`model_dump(by_alias=True)`). Invalid values raise pydantic's ValidationError; `hookserver.slo.errors`
turns it into one message with a dotted path per problem.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from hookserver.errors import QuantityError
from hookserver.quantity import parse_quantity
from hookserver.slo._base import SLOModel
from hookserver.slo.qos import ResourceQOSStrategy
from hookserver.slo.threshold import ResourceThresholdStrategy

__all__ = [
    "PARTS",
    "CPUBurstStrategy",
    "CgroupPath",
    "HostApplicationSpec",
    "NodeSLOSpec",
    "SystemStrategy",
]


class CPUBurstStrategy(SLOModel):
    # koordinator: a plain string; koordlet bursts for cpuBurstOnly / cfsQuotaBurstOnly / auto, nothing else.
    policy: str = "none"
    cpu_burst_percent: int = Field(default=1000, ge=0, alias="cpuBurstPercent")
    cfs_quota_burst_percent: int = Field(default=300, ge=100, alias="cfsQuotaBurstPercent")
    # -1 means a burst may last without limit.
    cfs_quota_burst_period_seconds: int = Field(default=-1, ge=-1, alias="cfsQuotaBurstPeriodSeconds")
    share_pool_threshold_percent: int = Field(default=50, ge=0, le=100, alias="sharePoolThresholdPercent")


class SystemStrategy(SLOModel):
    """vm sysctls: min_free_kbytes = total KiB × factor / 10000; watermark_scale_factor; memcg reaper."""

    # koordinator: `gt=0`, no upper bound; the QoS plugin writes only results inside koordlet's kernel range.
    min_free_kbytes_factor: int = Field(default=100, ge=0, alias="minFreeKbytesFactor")
    watermark_scale_factor: int = Field(default=150, ge=0, le=1000, alias="watermarkScaleFactor")
    memcg_reap_background: int = Field(default=0, ge=0, le=1, alias="memcgReapBackGround")
    total_network_bandwidth: str = Field(default="0", alias="totalNetworkBandwidth")

    @field_validator("total_network_bandwidth", mode="before")
    @classmethod
    def _quantity(cls, value: Any) -> str:
        text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
        if not isinstance(text, str):
            raise ValueError(f"must be a quantity string, got {type(value).__name__}")
        # Any Kubernetes quantity, as koordinator's resource.Quantity takes (a negative one too: nothing in
        # hookserver reads it; koordinator's netqos checks compare against it).
        try:
            parse_quantity(text)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        return text


class CgroupPath(SLOModel):
    """Where a host application's cgroup is: `<base>/<parentDir>/<relativePath>`."""

    base: Literal["CgroupRoot", "Kubepods", "KubepodsBurstable", "KubepodsBesteffort"] = "CgroupRoot"
    parent_dir: str = Field(default="", alias="parentDir")
    relative_path: str = Field(default="", alias="relativePath")

    @field_validator("parent_dir", "relative_path")
    @classmethod
    def _no_escape(cls, value: str) -> str:
        # These become cgroup paths; a '..' would let a ConfigMap point the executor outside its root.
        if any(part == ".." for part in value.replace("\\", "/").split("/")):
            raise ValueError(f"must not contain '..' components, got {value!r}")
        if "\x00" in value:
            raise ValueError("must not contain NUL bytes")
        return value


class HostApplicationSpec(SLOModel):
    """One of NodeSLO's `hostApplications`. `qos` is koordinator's `qos,omitempty` QoS class: none ("") when not
    given, not LS. koordlet pins only an LS application's cpuset and gives an unnamed class bvt 0; defaulting to
    LS would pin applications koordlet leaves alone."""

    name: str = Field(min_length=1)
    qos: Literal["LSE", "LSR", "LS", "BE", "SYSTEM", ""] = ""
    priority: str | None = None
    cgroup_path: CgroupPath | None = Field(default=None, alias="cgroupPath")
    strategy: dict[str, Any] | None = None


class NodeSLOSpec(SLOModel):
    resource_used_threshold_with_be: ResourceThresholdStrategy = Field(
        default_factory=ResourceThresholdStrategy, alias="resourceUsedThresholdWithBE"
    )
    resource_qos_strategy: ResourceQOSStrategy = Field(
        default_factory=ResourceQOSStrategy, alias="resourceQOSStrategy"
    )
    cpu_burst_strategy: CPUBurstStrategy = Field(default_factory=CPUBurstStrategy, alias="cpuBurstStrategy")
    system_strategy: SystemStrategy = Field(default_factory=SystemStrategy, alias="systemStrategy")
    host_applications: tuple[HostApplicationSpec, ...] = Field(default=(), alias="hostApplications")
    extensions: dict[str, Any] = Field(default_factory=dict)

    @field_validator("host_applications")
    @classmethod
    def _unique_names(cls, apps: tuple[HostApplicationSpec, ...]) -> tuple[HostApplicationSpec, ...]:
        seen: set[str] = set()
        for app in apps:
            if app.name in seen:
                raise ValueError(f"duplicate host application name {app.name!r}")
            seen.add(app.name)
        return apps

    def to_json(self) -> dict[str, Any]:
        """camelCase JSON, as Koordinator writes it (unknown fields included)."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)


# The top-level parts of a NodeSLO spec, in wire names. `sources` maps each to where it came from.
PARTS: tuple[str, ...] = (
    "resourceUsedThresholdWithBE",
    "resourceQOSStrategy",
    "cpuBurstStrategy",
    "systemStrategy",
    "hostApplications",
    "extensions",
)
