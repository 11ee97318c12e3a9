"""QoS settings (`qos:` in the config file), a leaf pydantic module that `hookserver.config` collects.

    qos:
      dry_run: false               # plan, audit and show; write and evict nothing (also --qos-dry-run)
      evict_standalone: report     # standalone mode: report evictions only, or `kill` (freezer, then SIGKILL)
      eviction_cooldown_s: 300     # a pod is never evicted twice within this long
      reconcilers:
        CPUSuppress: {interval_s: 1}
        MemoryEvict: {interval_s: 1, cooldown_s: 4, dry_run: true}

Reconciler names are checked against the reconcilers the daemon runs (unknown names stop startup).
Feature gates are not here: koordlet sets them with `--feature-gates`, so they are a top-level setting.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["QoSSettings", "ReconcilerSettings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReconcilerSettings(_Frozen):
    """Per reconciler; None keeps the reconciler's own default (koordlet's)."""

    interval_s: float | None = Field(default=None, gt=0, le=3600)
    cooldown_s: float | None = Field(default=None, ge=0, le=86400)
    dry_run: bool = False


class QoSSettings(_Frozen):
    enabled: bool = True
    dry_run: bool = False
    evict_standalone: Literal["report", "kill"] = "report"
    eviction_cooldown_s: float = Field(default=300.0, ge=0, le=86400)
    evict_timeout_s: float = Field(default=10.0, gt=0, le=120)
    reconcilers: dict[str, ReconcilerSettings] = Field(default_factory=dict)
    # TCNetworkQoS's interface; "" = the IPv4 default route's (koordlet's choice).
    network_interface: str = Field(default="", max_length=15, pattern=r"^[A-Za-z0-9_.:@-]*$")
