"""The `reconciler:` settings (the third front door). A leaf pydantic module the reconciler reads and
`hookserver.config` collects."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ReconcilerSettings"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReconcilerSettings(_Frozen):
    """The reconciler front door: re-applies hook values to running pods (koordlet's runtime-hooks
    reconciler, reference §3.6) and forgets pods whose cgroups are gone."""

    enabled: bool = True
    # koordlet's runtime-hooks-reconcile-interval: the periodic pass over every pod.
    interval_s: float = Field(default=10.0, gt=0)
    # Pod syncs (informer events, hook and NRI learning) start a pass for the changed pods, at most this
    # often: koordlet's kubelet pod-sync limiter, 5/s with a burst of 10.
    pod_sync_rate_per_s: float = Field(default=5.0, gt=0)
    pod_sync_burst: int = Field(default=10, ge=1)
    # A pod first seen this recently, none of whose containers has started, is being created: its hooks own it.
    creation_grace_s: float = Field(default=10.0, ge=0)
    # A pod whose cgroup has been gone this long, and that no informer source lists, is dropped from the
    # store with its caches and per-pod series (behind the proxy nothing else says a pod stopped).
    gc_grace_s: float = Field(default=60.0, ge=0)
